package runtrace

import (
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// A delegated run goes under the span that delegated it, so that a
// multi-agent run is one trace: the child session's runs become children
// of the parent's tool call that started the child (named by
// delegation.subagent.started in the parent's stream), else of the
// parent's run (named by the child's session.started parent). Unlike the
// ids above, where a child's runs go is learnt from events a consumer may
// see in any order, so it needs the consumer's memory.

// Delegator returns the span a delegation.subagent.started's child runs
// go under: the tool call named at data.tool.call_id, else the run the
// event belongs to; false when it belongs to no run.
func Delegator(ev *aep.Event) (Position, bool) {
	if ev.Run == "" {
		return Position{}, false
	}
	run := runKey{emitter(ev.Source), ev.Run}
	pos := Position{Kind: KindRun, TraceID: traceID(run), SpanID: spanID(run, "run", "")}
	if tool, ok := ev.Data["tool"].(map[string]any); ok {
		if id, ok := tool["call_id"].(string); ok && id != "" {
			pos.Kind, pos.ParentID, pos.SpanID = KindTool, pos.SpanID, spanID(run, "tool call ", id)
		}
	}
	return pos, true
}

// ParentRun returns the position of the parent run a child's
// session.started names at data.parent {session, run}; false when it names
// none. The parent's source is the child's with its session segment
// replaced, for the RECOMMENDED session-scoped source
// aep://{host}/agent/{agent}/session/{session}; a source without that
// segment is taken to be the parent's as well.
func ParentRun(started *aep.Event) (Position, bool) {
	parent, _ := started.Data["parent"].(map[string]any)
	session, _ := parent["session"].(string)
	runID, _ := parent["run"].(string)
	if session == "" || runID == "" {
		return Position{}, false
	}
	source := emitter(started.Source)
	if prefix, ok := strings.CutSuffix(source, "/session/"+started.Session); ok && started.Session != "" {
		source = prefix + "/session/" + session
	}
	run := runKey{source, runID}
	return Position{Kind: KindRun, TraceID: traceID(run), SpanID: spanID(run, "run", "")}, true
}
