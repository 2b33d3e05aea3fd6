package mapping

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// typeOversize stands in for a stored event too large to read.
const typeOversize = "x.openhands.event.oversize"

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
	if c.ended {
		return nil
	}
	e := c.begin(receivedAt)
	out := e.emit(typeOversize, origin{
		id:  o.ID,
		ts:  o.Timestamp,
		key: "event " + o.ID,
		at:  vendorTime(o.Timestamp, receivedAt),
	})
	out.Severity = aep.SeverityWarning
	if KnownKind(o.Kind) { // a bounded vocabulary, never free text
		set(out, "vendor_kind", o.Kind)
	}
	set(out, "size_bytes", json.Number(strconv.FormatInt(o.Size, 10)))
	set(out, "limit_bytes", json.Number(strconv.FormatInt(o.Limit, 10)))
	return e.out
}

// Event is the stored event as far as it is known (id and timestamp, no
// kind or content), for the Decorator to place its stand-in.
func (o Oversize) Event() Event {
	return Event{
		Fields:    map[string]any{"id": o.ID, "timestamp": o.Timestamp},
		id:        o.ID,
		timestamp: o.Timestamp,
	}
}
