package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
)

// maxCounted bounds the distinct tool calls and steps one open run
// remembers; a run beyond it reports no counts rather than a wrong one.
const maxCounted = 4096

// callCounts are what gen_ai.invoke_agent.tool_calls and .inference_calls
// report of one run: its distinct tool spans, and its distinct envelope
// steps (an emitter's step is one model response: the openhands receiver
// stamps the LLM response id there). Sets, so that a redelivered event
// counts once.
type callCounts struct {
	tools    map[[8]byte]struct{}
	steps    map[string]struct{}
	overflow bool
}

func newCallCounts() *callCounts {
	return &callCounts{tools: make(map[[8]byte]struct{}), steps: make(map[string]struct{})}
}

// countInRun adds ev to the counts of its run, when the tracker keeps
// counts and the run's start was seen (a run joined midway has no
// complete count).
func (t *tracker) countInRun(pos runtrace.Position, key openKey, ev *aep.Event) {
	if !t.countCalls || ev.Run == "" {
		return
	}
	runSpan := pos.SpanID
	if pos.Kind != runtrace.KindRun {
		runSpan = pos.ParentID
	}
	run := t.lookup(openKey{pos.TraceID, runSpan})
	if run == nil || run.calls == nil {
		return
	}
	c := run.calls
	if pos.Kind == runtrace.KindTool {
		c.tools[key.span] = struct{}{}
	}
	if ev.Step != "" {
		c.steps[ev.Step] = struct{}{}
	}
	if len(c.tools) > maxCounted || len(c.steps) > maxCounted {
		c.overflow = true
		clear(c.tools)
		clear(c.steps)
	}
}

// toolCalls and inferenceCalls are the run's counts; false when its start
// was not seen or it overflowed.
func (c *callCounts) toolCalls() (int, bool) {
	if c == nil || c.overflow {
		return 0, false
	}
	return len(c.tools), true
}

// inferenceCalls is also false for a run without steps: its emitter does
// not stamp them, and every run makes at least one model call.
func (c *callCounts) inferenceCalls() (int, bool) {
	if c == nil || c.overflow || len(c.steps) == 0 {
		return 0, false
	}
	return len(c.steps), true
}
