package aepconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
)

// delegated is an openhands-shaped multi-agent run: parent session p runs
// run:p:1, whose start_child_conversation call starts child session c,
// which runs run:c:1 with one tool call of its own.
type delegated struct{ at time.Time }

func (d delegated) event(session, typ, run string, offset time.Duration, data map[string]any) *aep.Event {
	return &aep.Event{
		AEP: aep.Version, ID: session + "-" + typ + "-" + run, Type: typ, Time: d.at.Add(offset).UTC().Format(time.RFC3339Nano),
		Source: "aep://h:8000/agent/openhands/session/" + session, Agent: "openhands", Session: session, Run: run,
		Seq: aep.Int64(0), Data: data,
	}
}

func (d delegated) parentCall(typ string, offset time.Duration) *aep.Event {
	return d.event("p", typ, "run:p:1", offset, map[string]any{"tool": map[string]any{"name": "start_child_conversation", "call_id": "call-c"}})
}

func (d delegated) delegation() *aep.Event {
	return d.delegationOf(map[string]any{"session": "c", "agent": "openhands"})
}

func (d delegated) delegationOf(child map[string]any) *aep.Event {
	return d.event("p", "delegation.subagent.started", "run:p:1", 2*time.Second, map[string]any{
		"child": child,
		"tool":  map[string]any{"name": "start_child_conversation", "call_id": "call-c"},
	})
}

func (d delegated) childStarted(parent map[string]any) *aep.Event {
	return d.event("c", "session.started", "", 3*time.Second, map[string]any{"parent": parent})
}

func (d delegated) childRun() []*aep.Event {
	call := map[string]any{"tool": map[string]any{"name": "bash", "call_id": "call-b"}}
	return []*aep.Event{
		d.event("c", "run.started", "run:c:1", 4*time.Second, nil),
		d.event("c", "tool.requested", "run:c:1", 5*time.Second, call),
		d.event("c", "tool.completed", "run:c:1", 6*time.Second, call),
		d.event("c", "run.finished", "run:c:1", 7*time.Second, nil),
	}
}

func TestDelegatedRunsJoinTheParentTrace(t *testing.T) {
	d := delegated{at: time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)}
	parentStart := []*aep.Event{d.event("p", "run.started", "run:p:1", 0, nil), d.parentCall("tool.requested", time.Second)}
	parentEnd := []*aep.Event{d.parentCall("tool.completed", 2*time.Second), d.event("p", "run.finished", "run:p:1", 9*time.Second, nil)}
	withRun := map[string]any{"session": "p", "agent": "openhands", "run": "run:p:1"}
	concat := func(parts ...[]*aep.Event) []*aep.Event {
		var all []*aep.Event
		for _, p := range parts {
			all = append(all, p...)
		}
		return all
	}
	for _, tc := range []struct {
		name string
		feed []*aep.Event
		// under is the name of the span the child run is under, "" for a
		// trace of its own.
		under string
	}{
		{"the delegating call, the child seen after it", concat(parentStart, []*aep.Event{d.delegation(), d.childStarted(withRun)}, d.childRun(), parentEnd), "execute_tool start_child_conversation"},
		{"the delegating call, the child's session started first", concat(parentStart, []*aep.Event{d.childStarted(withRun), d.delegation()}, d.childRun(), parentEnd), "execute_tool start_child_conversation"},
		{"the delegating call, the child's agent left to the parent's", concat(parentStart, []*aep.Event{d.delegationOf(map[string]any{"session": "c"})}, d.childRun(), parentEnd), "execute_tool start_child_conversation"},
		{"the parent run, when only session.started names it", concat(parentStart, []*aep.Event{d.childStarted(withRun)}, d.childRun(), parentEnd), "invoke_agent openhands"},
		{"a trace of its own, when the parent's run is not known", concat(parentStart, []*aep.Event{d.childStarted(map[string]any{"session": "p"})}, d.childRun(), parentEnd), ""},
		{"a trace of its own, when the child run ended before the link", concat(parentStart, d.childRun(), []*aep.Event{d.delegation()}, parentEnd), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.feed(t, tc.feed...)
			spans := map[string]ptrace.Span{} // by conversation and name
			for _, s := range h.allSpans() {
				conv, _ := s.Attributes().Get(attrConversationID)
				spans[conv.Str()+" "+s.Name()] = s
			}
			require.Len(t, spans, 4)
			childRun, childCall := spans["c invoke_agent openhands"], spans["c execute_tool bash"]
			assert.Equal(t, childRun.SpanID(), childCall.ParentSpanID(), "the child's call stays under the child's run")
			assert.Equal(t, childRun.TraceID(), childCall.TraceID())
			if tc.under == "" {
				assert.True(t, childRun.ParentSpanID().IsEmpty())
				assert.NotEqual(t, spans["p invoke_agent openhands"].TraceID(), childRun.TraceID())
				return
			}
			parent := spans["p "+tc.under]
			assert.Equal(t, parent.SpanID(), childRun.ParentSpanID())
			assert.Equal(t, parent.TraceID(), childRun.TraceID(), "one trace")
		})
	}
}

// An emitter that stamps runtrace's ids (the openhands receiver) says in
// which trace a child's records are: the spans go there too. A child
// stamped in its own trace stays there though the delegation links it; one
// stamped in the parent run's trace is there even when no link is seen
// (capture none: no data names the parent).
func TestDelegatedRunsStayWithTheirRecords(t *testing.T) {
	d := delegated{at: time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)}
	parentRun := d.event("p", "run.started", "run:p:1", 0, nil)
	parentPos, ok := runtrace.Locate(parentRun)
	require.True(t, ok)
	stamped := func(inParent bool) []*aep.Event {
		run := d.childRun()
		for _, ev := range run {
			pos, ok := runtrace.Locate(ev)
			require.True(t, ok)
			if inParent {
				pos.TraceID = parentPos.TraceID
			}
			ev.Traceparent = pos.Traceparent()
		}
		return run
	}
	withRun := map[string]any{"session": "p", "agent": "openhands", "run": "run:p:1"}
	for _, tc := range []struct {
		name     string
		link     []*aep.Event
		inParent bool
		under    string // the span the child run is under, "" for none
	}{
		{"own trace, though the delegating call links it", []*aep.Event{d.delegation()}, false, ""},
		{"the parent's trace, under the delegating call", []*aep.Event{d.childStarted(withRun), d.delegation()}, true, "execute_tool start_child_conversation"},
		{"the parent's trace, no link seen", nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.feed(t, append(append([]*aep.Event{parentRun, d.parentCall("tool.requested", time.Second)}, tc.link...),
				append(stamped(tc.inParent), d.parentCall("tool.completed", 2*time.Second), d.event("p", "run.finished", "run:p:1", 9*time.Second, nil))...)...)
			spans := map[string]ptrace.Span{}
			for _, s := range h.allSpans() {
				conv, _ := s.Attributes().Get(attrConversationID)
				spans[conv.Str()+" "+s.Name()] = s
			}
			require.Len(t, spans, 4)
			childRun, childCall := spans["c invoke_agent openhands"], spans["c execute_tool bash"]
			want := runtrace.Position{}
			if pos, ok := runtrace.Locate(d.childRun()[0]); ok {
				want = pos
			}
			if tc.inParent {
				want.TraceID = parentPos.TraceID
			}
			assert.Equal(t, pcommon.TraceID(want.TraceID), childRun.TraceID(), "the run's records' trace")
			assert.Equal(t, childRun.TraceID(), childCall.TraceID(), "the call's records' trace")
			if tc.under == "" {
				assert.True(t, childRun.ParentSpanID().IsEmpty())
				return
			}
			assert.Equal(t, spans["p "+tc.under].SpanID(), childRun.ParentSpanID())
		})
	}
}
