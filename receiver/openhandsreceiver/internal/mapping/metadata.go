package mapping

import (
	"encoding/json"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Metadata maps a change of conversation metadata that no event carries
// (the title: a rename changes the stored ConversationInfo without any
// ConversationStateUpdateEvent, and only the server's webhook shows it)
// to state.delta of the session, shaped as a
// state update's: data.key and the one-op patch. updatedAt is the
// ConversationInfo's updated_at, kept as data.vendor_ts. The event's id
// derives from key, value and updatedAt (a rename need not move
// updated_at), so one snapshot seen twice has one id.
func (c *Conversation) Metadata(key string, value any, updatedAt string, receivedAt time.Time) []*aep.Event {
	if c.s.Ended {
		return nil
	}
	shown, _ := json.Marshal(value) // a decoded JSON value: it encodes
	e := c.begin(receivedAt)
	o := origin{ts: updatedAt, key: "metadata " + key + " " + string(shown), at: vendorTime(updatedAt, receivedAt)}
	c.emitDelta(e, o, key, value)
	return e.out
}
