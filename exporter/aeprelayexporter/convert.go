package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"errors"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/logevent"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
)

// Reasons an event is dropped: the reason attribute of
// otelcol_aeprelay_events_rejected.
const (
	reasonProjection    = logevent.ReasonProjection
	reasonAgentMismatch = logevent.ReasonAgentMismatch
	reasonInvalid       = logevent.ReasonInvalid
	// reasonRelayRefused: the relay refused this event alone: an HTTP 400
	// (or a 207) for it alone, or a WebSocket error frame naming it.
	reasonRelayRefused = "relay_refused"
	// reasonTooLarge: the relay answered 413 for this event alone.
	reasonTooLarge = "too_large"
	// reasonSessionClaimed: another agent's event in a session the link of
	// agent carries (links.go, claimedByAgent).
	reasonSessionClaimed = "session_claimed"
	// reasonCommand: the record is a command. It is counted apart, by
	// otelcol_aeprelay_commands_refused, never as a rejected event.
	reasonCommand = "command"
)

// errCommand is why a command never leaves: the relay would route it, under
// this exporter's credentials, to whichever connection claims its session,
// this collector's own included, and its gate would execute it.
var errCommand = errors.New("an emitter never sends commands (AEP-0004 §4.1): whatever receiver produced this record, it is not sent")

// outboundEvent is one event ready for the relay.
type outboundEvent struct {
	id, typ, session string
	// agent picks the WebSocket link the event travels on.
	agent string
	// raw is the validated wire form (aep.Event.MarshalJSON).
	raw []byte
	// record locates the log record it came from, so that a retry can
	// carry only the records still to be sent.
	record logevent.RecordRef
}

// refusal is an event that will not be sent, and why. id and type are
// empty when the record could not be rebuilt far enough to know them.
type refusal struct {
	reason           string
	id, typ, session string
	// code and detail are the relay's, when the relay refused the event.
	code, detail string
	// err is this exporter's reason, when it refused the event itself.
	err error
}

// refusedByRelay is the refusal of ev that the relay answered with code.
func (ev outboundEvent) refusedByRelay(reason, code, detail string) refusal {
	if code == "" {
		code = "unknown"
	}
	return refusal{reason: reason, id: ev.id, typ: ev.typ, session: ev.session, code: code, detail: detail}
}

// converted sorts one push's records into what leaves and what does not.
type converted struct {
	// events are in record order.
	events []outboundEvent
	// skipped holds the event_name of each record that is not an AEP event.
	skipped []string
	refused []refusal
}

// converter turns log records back into wire events, a push at a time.
// It is pure.
type converter struct {
	logevent.Converter
}

// convert converts every record of ld, in record order.
func (c converter) convert(ld plog.Logs) converted {
	return c.source(ld).all()
}

// source converts ld's records lazily, in record order.
func (c converter) source(ld plog.Logs) *pushSource {
	return &pushSource{c: c, ld: ld, out: converted{events: make([]outboundEvent, 0, ld.LogRecordCount())}}
}

// pushSource converts one push's records as the transport takes their
// events, a chunk at a time: a socket has the first events on the wire,
// and the relay working on them, while the later ones are converted.
type pushSource struct {
	c  converter
	ld plog.Logs
	// next is the record to convert next.
	next logevent.RecordRef
	out  converted
	// taken counts the events of out handed to the transport.
	taken int
}

// take converts records until up to n events are ready, and hands them
// on; none once every record is converted and every event taken.
func (p *pushSource) take(n int) []outboundEvent {
	for len(p.out.events)-p.taken < n && p.convertNext() {
	}
	chunk := p.out.events[p.taken:min(len(p.out.events), p.taken+n)]
	p.taken += len(chunk)
	return chunk
}

// hasEvents reports whether an event is still to be taken.
func (p *pushSource) hasEvents() bool {
	for len(p.out.events) == p.taken && p.convertNext() {
	}
	return len(p.out.events) > p.taken
}

// all converts what is left and returns the whole push.
func (p *pushSource) all() converted {
	for p.convertNext() {
	}
	return p.out
}

// convertNext converts the next record; false when none is left.
func (p *pushSource) convertNext() bool {
	rls := p.ld.ResourceLogs()
	for ; p.next.Resource < rls.Len(); p.next.Resource, p.next.Scope = p.next.Resource+1, 0 {
		rl := rls.At(p.next.Resource)
		for ; p.next.Scope < rl.ScopeLogs().Len(); p.next.Scope, p.next.Record = p.next.Scope+1, 0 {
			records := rl.ScopeLogs().At(p.next.Scope).LogRecords()
			if p.next.Record == records.Len() {
				continue
			}
			lr := records.At(p.next.Record)
			ev, ref := p.c.event(lr, rl.Resource())
			switch {
			case errors.Is(ref.err, projection.ErrNotAEP):
				p.out.skipped = append(p.out.skipped, lr.EventName())
			case ref.err != nil:
				p.out.refused = append(p.out.refused, ref)
			default:
				ev.record = p.next
				p.out.events = append(p.out.events, ev)
			}
			p.next.Record++
			return true
		}
	}
	return false
}

// event rebuilds, checks, down-levels, marshals and validates one record.
// A refusal with a nil err means the event is ready. A command is refused
// by its record's type, before anything else is read, so that no shape of
// command record, valid or not, gets further.
func (c converter) event(lr plog.LogRecord, res pcommon.Resource) (outboundEvent, refusal) {
	if typ, ok := projection.TypeOf(lr); ok && aep.IsCommand(typ) {
		return outboundEvent{}, refusal{reason: reasonCommand, typ: typ, err: errCommand}
	}
	var ev aep.Event // only its wire form outlives the conversion
	raw, rejected := c.ConvertInto(lr, &ev)
	if rejected != nil {
		r := refusal{reason: rejected.Reason, err: rejected.Err}
		if rejected.Event != nil {
			r.id, r.typ, r.session = rejected.Event.ID, rejected.Event.Type, rejected.Event.Session
		}
		return outboundEvent{}, r
	}
	return outboundEvent{id: ev.ID, typ: ev.Type, session: ev.Session, agent: ev.Agent, raw: raw}, refusal{}
}
