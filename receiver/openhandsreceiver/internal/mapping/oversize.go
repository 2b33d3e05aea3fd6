package mapping

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The stand-ins for input the receiver could not map: visible gaps.
const (
	// typeOversize stands in for a stored event too large to read.
	typeOversize = "x.openhands.event.oversize"
	// typeUndecodable stands in for a frame or event that cannot be decoded.
	typeUndecodable = "x.openhands.frame.undecodable"
)

// Oversize names a stored event the receiver would not hold: larger than
// its frame limit, so neither the socket nor REST could carry it whole.
type Oversize struct {
	ID        string // vendor event id
	Kind      string // vendor kind, "" if unknown
	Timestamp string // vendor timestamp, "" if unknown
	Size      int64  // bytes as served (a lower bound if the read was cut short)
	Limit     int64  // the limit it exceeded (max_frame_bytes)
}

// Oversize returns x.openhands.event.oversize, at warning, in place of a
// stored event that could not be read: a visible gap naming the event, its
// kind and its size, never its content. Its id derives from the vendor
// event as the event's own mapping would.
func (c *Conversation) Oversize(o Oversize, receivedAt time.Time) []*aep.Event {
	data := map[string]any{
		"size_bytes":  json.Number(strconv.FormatInt(o.Size, 10)),
		"limit_bytes": json.Number(strconv.FormatInt(o.Limit, 10)),
	}
	if KnownKind(o.Kind) { // a bounded vocabulary, never free text
		data["vendor_kind"] = o.Kind
	}
	return c.standIn(typeOversize, origin{
		id:  o.ID,
		ts:  o.Timestamp,
		key: "event " + o.ID,
		at:  vendorTime(o.Timestamp, receivedAt),
	}, receivedAt, data)
}

// Undecodable names a frame, or a stored event, the receiver could not
// decode: only what is known without trusting its content.
type Undecodable struct {
	Size   int64  // bytes received
	Reason string // UndecodableFrame or UndecodableEvent
}

// Why input could not be decoded: a bounded vocabulary.
const (
	// UndecodableFrame: not a frame the receiver reads (not JSON, nested
	// deeper than 10,000, a NaN, a socket envelope member of the wrong type
	// or out of range, a durable frame without seq or event).
	UndecodableFrame = "frame"
	// UndecodableEvent: JSON, but not an agent-server event (no kind or id,
	// or one that is not a string).
	UndecodableEvent = "event"
)

// Undecodable returns x.openhands.frame.undecodable, at warning, in place
// of input that could not be decoded: a visible gap naming its size and
// why, never its content. Nothing identifies the input, so every call
// gets an id of its own.
func (c *Conversation) Undecodable(u Undecodable, receivedAt time.Time) []*aep.Event {
	c.undecodable++
	key := "undecodable " + strconv.FormatInt(receivedAt.UnixNano(), 10) + " " + strconv.FormatUint(c.undecodable, 10)
	return c.standIn(typeUndecodable, origin{key: key, at: receivedAt}, receivedAt, map[string]any{
		"reason":     u.Reason,
		"size_bytes": json.Number(strconv.FormatInt(u.Size, 10)),
	})
}

// standIn emits one vendor-plane event at warning in place of input that
// could not be mapped, carrying data (unless the capture level is none).
func (c *Conversation) standIn(typ string, o origin, receivedAt time.Time, data map[string]any) []*aep.Event {
	if c.s.Ended {
		return nil
	}
	e := c.begin(receivedAt)
	out := e.emit(typ, o)
	out.Severity = aep.SeverityWarning
	setAll(out, data)
	return e.out
}

// Event is the stored event as far as it is known (id and timestamp, no
// kind or content), for the Decorator to place its stand-in.
func (o Oversize) Event() Event {
	ev := At(o.Timestamp)
	ev.Fields = map[string]any{"id": o.ID, "timestamp": o.Timestamp}
	ev.id = o.ID
	return ev
}
