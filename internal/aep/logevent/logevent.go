// Package logevent turns OTel log records back into validated AEP wire
// events (the inverse OTLP projection, AEP-0005 §3), for the exporters that
// write AEP: aeprelay to a relay, aepfile to session logs.
package logevent

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

// Reasons a record never becomes a wire event: the reason attribute of the
// exporters' rejected-events counters.
const (
	// ReasonProjection: an AEP record the inverse projection cannot rebuild.
	ReasonProjection = "projection"
	// ReasonAgentMismatch: the event's agent has no link to travel on
	// (aeprelay with max_links: 1).
	ReasonAgentMismatch = "agent_mismatch"
	// ReasonInvalid: the event fails envelope or payload validation.
	ReasonInvalid = "invalid"
)

// Converter rebuilds wire events from log records. It is pure.
type Converter struct {
	// Ceiling down-levels events above it; "" leaves them as they are.
	Ceiling aep.Capture
}

// Rejection is why a record is not a wire event. Event is nil when the
// record could not be rebuilt; Err wraps projection.ErrNotAEP for a record
// that is not an AEP event at all.
type Rejection struct {
	Reason string
	Event  *aep.Event
	Err    error
}

// Convert rebuilds, checks, down-levels, marshals and validates one record:
// the event and its wire form (aep.Event.MarshalJSON), or why not.
func (c Converter) Convert(lr plog.LogRecord, _ pcommon.Resource) (*aep.Event, []byte, *Rejection) {
	ev := new(aep.Event)
	raw, rejected := c.ConvertInto(lr, ev)
	if rejected != nil {
		return nil, nil, rejected
	}
	return ev, raw, nil
}

// ConvertInto is Convert rebuilding the event into ev, which it overwrites:
// a caller that keeps only the wire form can keep the event on its stack.
// A rejection holds a copy of the event, never ev.
func (c Converter) ConvertInto(lr plog.LogRecord, ev *aep.Event) ([]byte, *Rejection) {
	if err := projection.FromLogRecordInto(lr, ev); err != nil {
		return nil, &Rejection{Reason: ReasonProjection, Err: err}
	}
	if c.Ceiling != "" {
		*ev = *capture.Downlevel(ev, c.Ceiling)
	}
	raw, err := ev.MarshalJSON()
	if err != nil {
		return nil, invalid(ev, fmt.Errorf("marshal event: %w", err))
	}
	// Validate judges the event as ValidateJSON would judge raw, without
	// decoding raw again.
	if err := schema.Validate(ev); err != nil {
		return nil, invalid(ev, err)
	}
	return raw, nil
}

func invalid(ev *aep.Event, err error) *Rejection {
	rejected := *ev
	return &Rejection{Reason: ReasonInvalid, Event: &rejected, Err: err}
}
