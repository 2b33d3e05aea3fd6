package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"encoding/json"
	"fmt"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// sessionFrame is one /sockets/session envelope; unknown types and fields
// are ignored, as the protocol asks of clients.
type sessionFrame struct {
	Type    string
	Seq     *int64
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

// decodeSessionFrame decodes one envelope in one pass (aep.DecodeValue),
// the event with it. A member of the wrong JSON type fails the frame, a
// null one reads as absent.
func decodeSessionFrame(raw []byte) (sessionFrame, error) {
	var f sessionFrame
	v, err := aep.DecodeValue(raw)
	if err != nil {
		return f, err
	}
	fields, ok := v.(map[string]any)
	if !ok {
		return f, fmt.Errorf("a session frame must be a JSON object")
	}
	for name, val := range fields {
		if val == nil {
			continue
		}
		switch name {
		case "type":
			err = frameString(name, val, &f.Type)
		case "seq":
			f.Seq, err = frameSeq(name, val)
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

// frameSeq reads a seq member.
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
