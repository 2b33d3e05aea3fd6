package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
	"github.com/otelcol-openhands/otelcol-openhands/internal/recent"
)

// maxLinkedSessions bounds the child sessions whose parent span the
// connector remembers; past it the oldest link is forgotten, and that
// child's later runs are traces of their own.
const maxLinkedSessions = 10000

// link is the span a child session's runs go under.
type link struct {
	trace [16]byte
	span  [8]byte
	// byTool marks the delegating tool call's span, which a parent run
	// never replaces.
	byTool bool
}

// lineage puts a child session's runs, and so their tool calls and
// waits, in the trace of the span that delegated them (runtrace's
// Delegator and ParentRun). A child run ended before its link was seen
// keeps a trace of its own. It is not safe for concurrent use.
type lineage struct {
	// links is keyed by childKey; a pointer, so that a known link can be
	// replaced in place.
	links recent.Window[*link]
}

func newLineage() *lineage { return &lineage{links: recent.New[*link](maxLinkedSessions)} }

// childKey names a child session.
func childKey(agent, session string) string { return agent + "\x00" + session }

// note learns a link from delegation.subagent.started (the delegating tool
// call, else the parent's run) or from a child's session.started (the
// parent's run).
func (l *lineage) note(ev *aep.Event) {
	switch ev.Type {
	case "delegation.subagent.started":
		child, _ := ev.Data["child"].(map[string]any)
		session, _ := child["session"].(string)
		agent, _ := child["agent"].(string)
		if agent == "" {
			agent = ev.Agent
		}
		if pos, ok := runtrace.Delegator(ev); ok && session != "" {
			l.put(childKey(agent, session), link{pos.TraceID, pos.SpanID, pos.Kind == runtrace.KindTool})
		}
	case "session.started":
		if pos, ok := runtrace.ParentRun(ev); ok {
			l.put(childKey(ev.Agent, ev.Session), link{pos.TraceID, pos.SpanID, false})
		}
	}
}

func (l *lineage) put(key string, to link) {
	if old := l.links.Get(key); old != nil {
		if !old.byTool || to.byTool {
			*old = to
		}
		return
	}
	l.links.Put(key, &to)
}

// place puts an operation where its log records are: in the trace its
// terminal's traceparent names when that carries the operation's own span
// id (an emitter that stamps runtrace's ids, such as the openhands
// receiver, which puts a child's runs in the trace of the parent run its
// session.started names). An operation of a linked child session then
// moves into its parent's trace, a run under the delegating span, unless
// its records are in another trace: records and spans never disagree.
func (l *lineage) place(op *operation) {
	stamped, span, ok := runtrace.ParseTraceparent(op.terminal.Traceparent)
	ok = ok && span == op.pos.SpanID
	if ok {
		op.pos.TraceID = stamped
	}
	to := l.links.Get(childKey(op.terminal.Agent, op.terminal.Session))
	if to == nil || ok && to.trace != stamped {
		return
	}
	op.pos.TraceID = to.trace
	if op.pos.Kind == runtrace.KindRun {
		op.pos.ParentID = to.span
	}
}
