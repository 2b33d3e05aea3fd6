package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestWaterfallNestsADelegatedRun: a child session's run, in its parent's
// trace under the delegating tool call, is drawn there with its tool call,
// not as a waterfall of its own; a span whose parent never arrived is a
// root.
func TestWaterfallNestsADelegatedRun(t *testing.T) {
	traces := ptrace.NewTraces()
	spans := traces.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	origin := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	trace := pcommon.TraceID{1}
	add := func(name, session string, id, parent byte, from, to int) {
		s := spans.AppendEmpty()
		s.SetName(name)
		s.SetTraceID(trace)
		s.SetSpanID(pcommon.SpanID{id})
		if parent != 0 {
			s.SetParentSpanID(pcommon.SpanID{parent})
		}
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(origin.Add(time.Duration(from) * time.Second)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(origin.Add(time.Duration(to) * time.Second)))
		s.Attributes().PutStr("session.id", session)
		s.Attributes().PutStr("gen_ai.agent.name", "openhands")
	}
	// Received out of order, as a batch may deliver them.
	add("execute_tool terminal", "child-session", 4, 3, 3, 4)
	add("invoke_agent openhands", "child-session", 3, 2, 2, 5)
	add("execute_tool start_child_conversation", "parent-session", 2, 1, 1, 2)
	add("invoke_agent openhands", "parent-session", 1, 0, 0, 6)
	add("execute_tool orphan", "parent-session", 9, 8, 5, 6)

	var out strings.Builder
	s := make([]ptrace.Span, spans.Len())
	for i := range s {
		s[i] = spans.At(i)
	}
	writeWaterfall(&out, s)

	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		name := strings.TrimPrefix(line, "waterfall| ")
		names = append(names, strings.TrimRight(name[:min(len(name), nameWidth)], " "))
	}
	assert.Equal(t, []string{
		"session parent-session, agent openhands",
		"span",
		"invoke_agent openhands",
		"  execute_tool start_child_conversation",
		"    invoke_agent openhands (session child-se)",
		"      execute_tool terminal",
		"execute_tool orphan",
	}, names, out.String())
}
