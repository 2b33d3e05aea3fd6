package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// sessionFrame is one /sockets/session envelope; unknown types and fields
// are ignored, as the protocol asks of clients.
type sessionFrame struct {
	Type string
	// Seq is a durable frame's seq; HasSeq tells whether the frame has
	// one (a value, not a pointer: every durable frame has one, and a
	// pointer cost an allocation each).
	Seq     int64
	HasSeq  bool
	Event   any // as aep.DecodeValue decodes it
	ItemID  string
	Attempt int
	Order   int
	Kind    string
	Content string
	Code    string
	Detail  string
	// ThroughSeq is a sync frame's last seq of the log, nil when it is
	// empty.
	ThroughSeq *int64
}

// frameMembers are the envelope members a sessionFrame reads.
var frameMembers = [...]string{"type", "seq", "through_seq", "event", "item_id", "attempt", "order", "kind", "content", "code", "detail"}

// decodeSessionFrame decodes one envelope in one pass (aep.DecodeMembers),
// the event with it, into the frame's fields rather than a map. A member
// of the wrong JSON type fails the frame, a null one reads as absent; of
// a name given twice, the last counts.
func decodeSessionFrame(raw []byte) (sessionFrame, error) {
	var last [len(frameMembers)]any
	err := aep.DecodeMembers(raw, func(name string, val any) {
		if i := slices.Index(frameMembers[:], name); i >= 0 {
			last[i] = val
		}
	})
	switch {
	case errors.Is(err, aep.ErrNotObject):
		return sessionFrame{}, fmt.Errorf("a session frame must be a JSON object")
	case err != nil:
		return sessionFrame{}, err
	}
	var f sessionFrame
	for i, val := range last {
		if val == nil {
			continue
		}
		switch name := frameMembers[i]; name {
		case "type":
			err = frameString(name, val, &f.Type)
		case "seq":
			err = frameInt(name, val, &f.Seq)
			f.HasSeq = err == nil
		case "through_seq":
			f.ThroughSeq, err = frameSeq(name, val)
		case "event":
			f.Event = val
		case "item_id":
			err = frameString(name, val, &f.ItemID)
		case "attempt":
			err = frameInt(name, val, &f.Attempt)
		case "order":
			err = frameInt(name, val, &f.Order)
		case "kind":
			err = frameString(name, val, &f.Kind)
		case "content":
			err = frameString(name, val, &f.Content)
		case "code":
			err = frameString(name, val, &f.Code)
		case "detail":
			err = frameString(name, val, &f.Detail)
		}
		if err != nil {
			return sessionFrame{}, err
		}
	}
	return f, nil
}

func frameString(name string, val any, dst *string) error {
	s, ok := val.(string)
	if !ok {
		return fmt.Errorf("session frame member %q must be a string", name)
	}
	*dst = s
	return nil
}

// frameSeq reads a through_seq member.
func frameSeq(name string, val any) (*int64, error) {
	var seq int64
	if err := frameInt(name, val, &seq); err != nil {
		return nil, err
	}
	return &seq, nil
}

func frameInt[T int | int64](name string, val any, dst *T) error {
	n, ok := val.(json.Number)
	if !ok {
		return fmt.Errorf("session frame member %q must be an integer", name)
	}
	i, err := n.Int64()
	if err != nil || int64(T(i)) != i {
		return fmt.Errorf("session frame member %q must be an integer, got %s", name, n)
	}
	*dst = T(i)
	return nil
}
