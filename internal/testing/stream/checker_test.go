package stream

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

const (
	sourceA = "aep://h/agent/a/session/s"
	sourceB = "aep://h/agent/b/session/s"
)

type option func(*aep.Event)

func seq(n int64) option            { return func(e *aep.Event) { e.Seq = aep.Int64(n) } }
func epoch(n int64) option          { return func(e *aep.Event) { e.Epoch = aep.Int64(n) } }
func run(r string) option           { return func(e *aep.Event) { e.Run = r } }
func subject(s string) option       { return func(e *aep.Event) { e.Subject = s } }
func cause(id string) option        { return func(e *aep.Event) { e.Cause = id } }
func source(s string) option        { return func(e *aep.Event) { e.Source = s } }
func inSession(s string) option     { return func(e *aep.Event) { e.Session = s } }
func captured(c aep.Capture) option { return func(e *aep.Event) { e.Capture = c } }

// data decodes a JSON object the way aep.Parse would (numbers as json.Number).
func data(t *testing.T, raw string) option {
	t.Helper()
	v, err := aep.DecodeValue([]byte(raw))
	require.NoError(t, err)
	return func(e *aep.Event) { e.Data = v.(map[string]any) }
}

// event builds an event of session "s" emitted by sourceA.
func event(typ, id string, opts ...option) *aep.Event {
	e := &aep.Event{AEP: aep.Version, ID: id, Type: typ, Time: "2026-07-03T10:00:00Z",
		Source: sourceA, Agent: "a", Session: "s"}
	for _, o := range opts {
		o(e)
	}
	return e
}

type streamCase struct {
	name   string
	events []*aep.Event
	// failAt is the index of the event Add must reject with rule; -1 when
	// the whole stream is legal.
	failAt int
	rule   error
}

func runStreamCases(t *testing.T, cases []streamCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Checker{}
			for i, ev := range tc.events {
				err := c.Add(ev)
				if i == tc.failAt {
					require.ErrorIs(t, err, tc.rule, "event %d", i)
					continue
				}
				require.NoError(t, err, "event %d", i)
			}
		})
	}
}

func TestOrdering(t *testing.T) {
	runStreamCases(t, []streamCase{
		{name: "gaps are legal", failAt: -1, events: []*aep.Event{
			event("progress.status", "1", seq(0)), event("progress.status", "2", seq(5)), event("progress.status", "3", seq(9)),
		}},
		{name: "an epoch bump restarts seq", failAt: -1, events: []*aep.Event{
			event("progress.status", "1", seq(5)), event("progress.status", "2", seq(0), epoch(1)), event("progress.status", "3", seq(1), epoch(1)),
		}},
		{name: "absent epoch is epoch 0", failAt: 1, rule: ErrOrdering, events: []*aep.Event{
			event("progress.status", "1", seq(3)), event("progress.status", "2", seq(2), epoch(0)),
		}},
		{name: "seq regression", failAt: 1, rule: ErrOrdering, events: []*aep.Event{
			event("progress.status", "1", seq(5)), event("progress.status", "2", seq(3)),
		}},
		{name: "two events at one position", failAt: 1, rule: ErrOrdering, events: []*aep.Event{
			event("progress.status", "1", seq(5)), event("progress.status", "2", seq(5)),
		}},
		{name: "epoch regression", failAt: 1, rule: ErrOrdering, events: []*aep.Event{
			event("progress.status", "1", seq(0), epoch(1)), event("progress.status", "2", seq(1), epoch(0)),
		}},
		{name: "positions are per emitter", failAt: -1, events: []*aep.Event{
			event("run.started", "1", seq(0)), event("run.started", "1", seq(0), source(sourceB)),
		}},
		{name: "positions are per session", failAt: -1, events: []*aep.Event{
			event("progress.status", "1", seq(4)), event("progress.status", "2", seq(0), inSession("t")),
		}},
		{name: "events without seq carry no position", failAt: -1, events: []*aep.Event{
			event("progress.status", "1", seq(4)), event("control.pause", "2"), event("progress.status", "3", seq(5)),
		}},
		{name: "a rejected event does not move the position", failAt: 1, rule: ErrOrdering, events: []*aep.Event{
			event("progress.status", "1", seq(5)), event("progress.status", "2", seq(3)), event("progress.status", "3", seq(6)),
		}},
	})
}

func TestIDCollision(t *testing.T) {
	started := event("run.started", "1", seq(0), run("r1"))
	finished := event("run.finished", "2", seq(1), run("r1"))
	runStreamCases(t, []streamCase{
		{name: "identical redelivery, even below the high-water mark and of a terminal", failAt: -1, events: []*aep.Event{
			started, finished, started.Clone(), finished.Clone(),
		}},
		{name: "same id with different content", failAt: 1, rule: ErrIDCollision, events: []*aep.Event{
			started, event("run.started", "1", seq(1), run("r2")),
		}},
		{name: "same id from another emitter", failAt: -1, events: []*aep.Event{
			started, event("run.started", "1", seq(0), run("r2"), source(sourceB)),
		}},
		{name: "a collision is not absorbed into the state", failAt: 1, rule: ErrIDCollision, events: []*aep.Event{
			started, event("run.started", "1", seq(1), run("r2")), started.Clone(),
		}},
	})
}

// TestRedeliveryComparesCanonicalJSON: a redelivery re-encoded differently
// (member order, number spelling) is still the same event.
func TestRedeliveryComparesCanonicalJSON(t *testing.T) {
	first, err := aep.Parse([]byte(`{"aep":"0.1","id":"1","type":"tool.completed","time":"2026-07-03T10:00:00Z","source":"aep://h/agent/a","agent":"a","session":"s","seq":0,"data":{"tool":{"name":"Bash"},"duration_ms":1240}}`))
	require.NoError(t, err)
	again, err := aep.Parse([]byte(`{"data":{"duration_ms":1.24e3,"tool":{"name":"Bash"}},"seq":0,"session":"s","agent":"a","source":"aep://h/agent/a","time":"2026-07-03T10:00:00Z","type":"tool.completed","id":"1","aep":"0.1"}`))
	require.NoError(t, err)
	c := &Checker{}
	require.NoError(t, c.Add(first))
	require.NoError(t, c.Add(again))
}

func TestLifecycle(t *testing.T) {
	runStreamCases(t, []streamCase{
		{name: "second terminal of another type", failAt: 1, rule: ErrLifecycle, events: []*aep.Event{
			event("run.finished", "1", seq(0), run("r1")), event("run.cancelled", "2", seq(1), run("r1")),
		}},
		{name: "second terminal in a later epoch", failAt: 1, rule: ErrLifecycle, events: []*aep.Event{
			event("run.failed", "1", seq(7), run("r1")), event("run.failed", "2", seq(0), epoch(1), run("r1")),
		}},
		{name: "one terminal per run", failAt: -1, events: []*aep.Event{
			event("run.finished", "1", seq(0), run("r1")), event("run.failed", "2", seq(1), run("r2")),
			event("run.finished", "3", seq(0), run("r1"), inSession("t")),
		}},
		{name: "terminals without run are not counted", failAt: -1, events: []*aep.Event{
			event("run.finished", "1", seq(0)), event("run.finished", "2", seq(1)),
		}},
		{name: "late events after terminals stay legal", failAt: -1, events: []*aep.Event{
			event("run.finished", "1", seq(0), run("r1")), event("tool.completed", "2", seq(1), run("r1")),
			event("session.ended", "3", seq(2)), event("progress.status", "4", seq(3)),
		}},
		{name: "second session.ended", failAt: 1, rule: ErrLifecycle, events: []*aep.Event{
			event("session.ended", "1", seq(0)), event("session.ended", "2", seq(1)),
		}},
		{name: "session.ended while attention is open", failAt: 3, rule: ErrLifecycle, events: []*aep.Event{
			event("attention.requested", "q1", seq(0)), event("attention.requested", "q2", seq(1)),
			event("attention.resolved", "r1", seq(2), subject("q1")), event("session.ended", "e", seq(3)),
		}},
		{name: "session.ended after resolved and timeout", failAt: -1, events: []*aep.Event{
			event("attention.requested", "q1", seq(0)), event("attention.requested", "q2", seq(1)),
			event("attention.resolved", "r1", seq(2), subject("q1")), event("attention.timeout", "t2", seq(3), subject("q2")),
			event("session.ended", "e", seq(4)),
		}},
		{name: "attention is tracked per emitter", failAt: -1, events: []*aep.Event{
			event("attention.requested", "q1", seq(0), source(sourceB)), event("session.ended", "e", seq(0)),
		}},
	})
}

func TestAckExclusivity(t *testing.T) {
	runStreamCases(t, []streamCase{
		{name: "second accepted", failAt: 1, rule: ErrAckExclusivity, events: []*aep.Event{
			event("control.accepted", "a1", seq(0), cause("cmd")), event("control.accepted", "a2", seq(1), cause("cmd")),
		}},
		{name: "accepted then rejected", failAt: 1, rule: ErrAckExclusivity, events: []*aep.Event{
			event("control.accepted", "a1", seq(0), cause("cmd")), event("control.rejected", "a2", seq(1), cause("cmd")),
		}},
		{name: "a recorded ack re-sent byte-identically", failAt: -1, events: []*aep.Event{
			event("control.accepted", "a1", seq(0), cause("cmd")), event("control.accepted", "a1", seq(0), cause("cmd")),
		}},
		{name: "one ack per command", failAt: -1, events: []*aep.Event{
			event("control.accepted", "a1", seq(0), cause("cmd1")), event("control.rejected", "a2", seq(1), cause("cmd2")),
			event("control.accepted", "a3", seq(0), cause("cmd1"), source(sourceB)),
		}},
		{name: "acks without cause are not paired", failAt: -1, events: []*aep.Event{
			event("control.accepted", "a1", seq(0)), event("control.accepted", "a2", seq(1)),
		}},
		{name: "outcomes caused by the command are not acks", failAt: -1, events: []*aep.Event{
			event("control.accepted", "a1", seq(0), cause("cmd")), event("run.cancelled", "o1", seq(1), cause("cmd")),
		}},
	})
}

func TestFormValues(t *testing.T) {
	form := `{"kind":"form","prompt":"p","fields":[
		{"id":"name","type":"string","label":"1","required":true},
		{"id":"count","type":"number","label":"2"},
		{"id":"staged","type":"boolean","label":"3"},
		{"id":"regions","type":"select","label":"4","multi":true,"choices":[{"id":"1","label":"1"},{"id":"2","label":"2"}]},
		{"id":"db","type":"select","label":"5","other":true,"choices":[{"id":"1","label":"1"}]},
		{"id":"tier","type":"select","label":"6","choices":[{"id":"1","label":"1"}]}]}`
	request := func() *aep.Event {
		return event("attention.requested", "q", seq(0), captured(aep.CaptureRedacted), data(t, form))
	}
	answered := func(values string, opts ...option) *aep.Event {
		opts = append([]option{seq(1), subject("q"), captured(aep.CaptureRedacted), data(t, `{"answer":{"values":`+values+`}}`)}, opts...)
		return event("attention.answered", "ans", opts...)
	}
	legal := func(name string, values string, opts ...option) streamCase {
		return streamCase{name: name, failAt: -1, events: []*aep.Event{request(), answered(values, opts...)}}
	}
	illegal := func(name string, values string, opts ...option) streamCase {
		return streamCase{name: name, failAt: 1, rule: ErrFormValues, events: []*aep.Event{request(), answered(values, opts...)}}
	}
	runStreamCases(t, []streamCase{
		legal("every field answered", `{"name":"x","count":3,"staged":true,"regions":["1","2"],"db":"MariaDB","tier":"1"}`),
		legal("only the required field", `{"name":"x"}`),
		legal("keys of no field are ignored", `{"name":"x","extra":{"k":1}}`),
		illegal("required field missing", `{"count":3}`),
		illegal("non-choice for a select without other", `{"name":"x","tier":"gold"}`),
		illegal("non-choice inside a multi select", `{"name":"x","regions":["1","9"]}`),
		illegal("multi select given a single id", `{"name":"x","regions":"1"}`),
		illegal("single select given an array", `{"name":"x","tier":["1"]}`),
		illegal("number field given text", `{"name":"x","count":"3"}`),
		illegal("boolean field given a string", `{"name":"x","staged":"yes"}`),
		illegal("values not an object", `["x"]`),
		illegal("string value at capture metadata", `{"name":"x"}`, captured(aep.CaptureMetadata)),
		illegal("other free text at capture metadata", `{"name":"x","db":"MariaDB"}`, captured("")),
		{name: "a closed form is no longer judged", failAt: -1, events: []*aep.Event{
			request(), event("attention.resolved", "res", seq(1), subject("q")), answered(`{}`, seq(2)),
		}},
		{name: "answers to non-form requests are not judged", failAt: -1, events: []*aep.Event{
			event("attention.requested", "q", seq(0), data(t, `{"kind":"input","prompt":"p"}`)), answered(`{"anything":1}`),
		}},
		{name: "an answer without values is not judged", failAt: -1, events: []*aep.Event{
			request(), event("attention.answered", "ans", seq(1), subject("q"), data(t, `{"answer":{"option":"1"}}`)),
		}},
	})
}

func TestAddErrorNamesTheEvent(t *testing.T) {
	c := &Checker{}
	require.NoError(t, c.Add(event("progress.status", "first", seq(5))))
	err := c.Add(event("progress.status", "second", seq(3)))
	require.ErrorIs(t, err, ErrOrdering)
	assert.Contains(t, err.Error(), "second")
	assert.Contains(t, err.Error(), "seq 3 after seq 5")
	assert.NotErrorIs(t, err, ErrLifecycle)
}

func TestAddRefusesWhatCannotBeSerialized(t *testing.T) {
	c := &Checker{}
	assert.Error(t, c.Add(nil))
	bad := event("progress.status", "1", seq(0))
	bad.Extensions = map[string]any{"acmemeta": map[string]any{"k": 1}}
	err := c.Add(bad)
	require.ErrorIs(t, err, aep.ErrExtension)
}

func BenchmarkCheckerAdd(b *testing.B) {
	ev, err := aep.Parse([]byte(`{"aep":"0.1","id":"01JX9YB3P4T90000000000GOLD","type":"tool.completed","subject":"Bash","time":"2026-07-03T10:15:04.221Z","source":"aep://host-a/agent/claude-code/session/s_8f2c","agent":"claude-code","session":"s_8f2c","run":"r_0042","step":"turn-3","seq":3,"epoch":0,"cause":"01JX9YB2Z1QK0000000000GOLD","severity":"info","capture":"metadata","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","data":{"tool":{"name":"Bash","call_id":"t_91"},"status":"success","duration_ms":1240,"gen_ai.usage.input_tokens":142,"gen_ai.usage.output_tokens":87}}`))
	require.NoError(b, err)
	c := &Checker{}
	var n int64
	b.ReportAllocs()
	for b.Loop() {
		// Each event is new: a fresh id (one small allocation of the
		// benchmark's own) at the next position.
		n++
		ev.ID = strconv.FormatInt(n, 36)
		*ev.Seq = n
		if err := c.Add(ev); err != nil {
			b.Fatal(err)
		}
	}
}
