package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"container/list"
	"strings"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

// maxSpanEvents bounds the error.raised events one open run collects.
const maxSpanEvents = 32

// operation is one ended run, tool call or attention wait: what a span and
// the duration metrics are built from.
type operation struct {
	pos runtrace.Position
	// terminal is the event that ended it (run.finished, tool.failed,
	// attention.resolved, ...).
	terminal   *aep.Event
	start, end time.Time
	// startKnown is false when neither a duration nor the start event was
	// available: the operation is reported with zero duration at its end.
	startKnown bool
	// attentionKind is attention.requested's kind, when its start was seen.
	attentionKind string
	// errors are the run's error.raised events, for a run.
	errors []timedEvent
	// run is the run id: the terminal's, else its start's (attention
	// answers may omit it).
	run string
	// unanswered marks a tool call or wait still open when its run ended:
	// terminal is then its start event, and it ends with the run.
	unanswered bool
	// calls are a run's counts, nil when its start was not seen.
	calls *callCounts
}

type timedEvent struct {
	ev *aep.Event
	at time.Time
}

// openKey names an open operation: span ids are unique within a trace.
type openKey struct {
	trace [16]byte
	span  [8]byte
}

// openStart is an operation whose start was seen and whose end was not.
type openStart struct {
	key openKey
	pos runtrace.Position
	// attention is the source and id of an attention.requested, whose
	// answers may omit the run (the golden stream's do).
	attention     string
	at            time.Time // the start event's time
	seen          time.Time // when it was stored, for the TTL
	attentionKind string
	errors        []timedEvent
	run           string
	// start is the start event of a tool call or attention wait, which
	// becomes the terminal of an unanswered one.
	start *aep.Event
	// calls counts a run's tool calls and inference calls (runcounts.go).
	calls *callCounts
}

// tracker turns a stream of AEP events into ended operations. Terminals
// that carry their duration (duration_ms, latency_ms, after_ms) need no
// state at all; for sources whose terminals do not, it remembers open
// starts in a map bounded by count (the oldest is evicted for a new one)
// and age (entries older than ttl are swept). Both evictions are reported
// through evicted. It is not safe for concurrent use.
type tracker struct {
	maxOpen int
	ttl     time.Duration
	now     func() time.Time
	evicted func(reason string)
	// countCalls keeps runs' call counts (runcounts.go), which only the
	// latest conventions' metrics report.
	countCalls bool

	open  map[openKey]*list.Element // of *openStart
	order list.List                 // oldest first
	// attention indexes the open attention waits by source and request id.
	attention map[string]*list.Element
}

func newTracker(cfg OpenSpansConfig, evicted func(reason string)) *tracker {
	return &tracker{
		maxOpen:   cfg.MaxEntries,
		ttl:       cfg.TTL,
		now:       time.Now,
		evicted:   evicted,
		open:      make(map[openKey]*list.Element),
		attention: make(map[string]*list.Element),
	}
}

// observe takes one event at its time and returns the operations it ends.
func (t *tracker) observe(ev *aep.Event, at time.Time) []*operation {
	pos, ok := runtrace.Locate(ev)
	if !ok {
		if pos, ok = t.attentionOf(ev); !ok {
			if pos, ok = runtrace.LocateWithoutRun(ev); !ok {
				return nil
			}
		}
	}
	key := openKey{pos.TraceID, pos.SpanID}
	t.countInRun(pos, key, ev)
	switch ev.Type {
	case "run.started", "tool.requested", "attention.requested":
		t.start(pos, ev, at)
		return nil
	case "run.finished", "run.failed", "run.cancelled",
		"tool.completed", "tool.failed", "tool.denied",
		"attention.resolved", "attention.timeout":
		op := t.finish(pos, key, ev, at)
		if pos.Kind == runtrace.KindRun {
			return append(t.unanswered(pos.TraceID, op), op)
		}
		return []*operation{op}
	case "error.raised":
		if s := t.lookup(key); s != nil && len(s.errors) < maxSpanEvents {
			s.errors = append(s.errors, timedEvent{ev, at})
		}
	}
	return nil
}

// attentionOf finds the open wait an attention event without a run
// answers, by its subject (the request id).
func (t *tracker) attentionOf(ev *aep.Event) (runtrace.Position, bool) {
	if !strings.HasPrefix(ev.Type, "attention.") || ev.Subject == "" {
		return runtrace.Position{}, false
	}
	if e, ok := t.attention[ev.Source+"\n"+ev.Subject]; ok {
		return e.Value.(*openStart).pos, true
	}
	return runtrace.Position{}, false
}

func (t *tracker) start(pos runtrace.Position, ev *aep.Event, at time.Time) {
	if t.maxOpen == 0 {
		return
	}
	key := openKey{pos.TraceID, pos.SpanID}
	if e, ok := t.open[key]; ok { // a redelivered start
		t.remove(e)
	}
	for len(t.open) >= t.maxOpen {
		t.evict(t.order.Front(), "capacity")
	}
	s := &openStart{key: key, pos: pos, at: at, seen: t.now(), run: ev.Run}
	if pos.Kind != runtrace.KindRun {
		s.start = ev
	} else if t.countCalls {
		s.calls = newCallCounts()
	}
	e := t.order.PushBack(s)
	t.open[key] = e
	if ev.Type == "attention.requested" {
		s.attentionKind, _ = ev.Data["kind"].(string)
		s.attention = ev.Source + "\n" + ev.ID
		t.attention[s.attention] = e
	}
}

// remove forgets an open start.
func (t *tracker) remove(e *list.Element) *openStart {
	s := t.order.Remove(e).(*openStart)
	delete(t.open, s.key)
	if s.attention != "" {
		delete(t.attention, s.attention)
	}
	return s
}

func (t *tracker) lookup(key openKey) *openStart {
	if e, ok := t.open[key]; ok {
		return e.Value.(*openStart)
	}
	return nil
}

func (t *tracker) finish(pos runtrace.Position, key openKey, ev *aep.Event, at time.Time) *operation {
	op := &operation{pos: pos, terminal: ev, end: at, run: ev.Run}
	if e, ok := t.open[key]; ok {
		s := t.remove(e)
		op.start, op.startKnown = s.at, true
		op.attentionKind, op.errors, op.run, op.calls = s.attentionKind, s.errors, s.run, s.calls
	}
	if d, ok := terminalDuration(ev); ok {
		op.start, op.startKnown = at.Add(-d), true
	}
	if !op.startKnown {
		op.start = at
	}
	return op
}

// unanswered ends the tool calls and waits of a run still open when the
// run ended (a call the user rejected, one cut short): each becomes a span
// from its start to the run's end, so every event of the run names a span.
func (t *tracker) unanswered(trace [16]byte, run *operation) []*operation {
	var ops []*operation
	for e := t.order.Front(); e != nil; {
		next := e.Next()
		if s := e.Value.(*openStart); s.key.trace == trace && s.start != nil {
			t.remove(e)
			end := run.end
			if end.Before(s.at) {
				end = s.at
			}
			ops = append(ops, &operation{
				pos: s.pos, terminal: s.start, start: s.at, end: end, startKnown: true,
				attentionKind: s.attentionKind, run: s.run, unanswered: true,
			})
		}
		e = next
	}
	return ops
}

// sweep evicts the open starts older than the TTL.
func (t *tracker) sweep() {
	cutoff := t.now().Add(-t.ttl)
	for e := t.order.Front(); e != nil && e.Value.(*openStart).seen.Before(cutoff); e = t.order.Front() {
		t.evict(e, "expired")
	}
}

func (t *tracker) evict(e *list.Element, reason string) {
	t.remove(e)
	t.evicted(reason)
}

// terminalDuration reads the duration a terminal event reports of its
// operation: duration_ms (runs, tool calls), latency_ms
// (attention.resolved) or after_ms (attention.timeout).
func terminalDuration(ev *aep.Event) (time.Duration, bool) {
	field := "duration_ms"
	switch ev.Type {
	case "attention.resolved":
		field = "latency_ms"
	case "attention.timeout":
		field = "after_ms"
	}
	ms, ok := usage.Number(ev.Data[field])
	if !ok || ms < 0 {
		return 0, false
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}
