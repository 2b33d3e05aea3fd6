package mapping

import (
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// What the control gate (extension/openhandscontrol) reads and builds
// through a conversation: the facts its guards check and envelopes shaped
// like every other event of the session. The gate decides the content; the
// conversation decides source, agent, run, severity and capture, so acks
// and outcomes obey the same ceiling as the mapping.

// Attention is the id of the live attention.requested, "" when none is
// pending: the only subject a respond may name.
func (c *Conversation) Attention() string { return c.s.Attention }

// NewEvent returns an envelope of this session built at at: id derived
// from key (so one fact keeps one id), the open run, the type's severity
// and capture level, no vendor stamps. Data is nil at capture none.
func (c *Conversation) NewEvent(typ string, at time.Time, key string) *aep.Event {
	return c.begin(at).emitAt(typ, origin{key: key, at: at}, 0)
}

// Redacted returns s as a field annotated redacted may carry it in out:
// redacted at redacted, verbatim at full, nothing below.
func (c *Conversation) Redacted(out *aep.Event, s string) (string, bool) {
	return c.text(out, s)
}
