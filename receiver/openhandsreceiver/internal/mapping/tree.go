package mapping

import (
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The conversation tree. The agent server (1.58.2) records it in
// ConversationInfo: a child conversation names its parent
// (parent_conversation_id), a fork its source conversation and event
// (forked_from_conversation_id, forked_from_event_id). The parent's own
// stream shows the agent starting a child: the start_child_conversation
// tool's observation carries the child's conversation_id.

const (
	typeSubagentStarted = "delegation.subagent.started"
	typeSubagentStopped = "delegation.subagent.stopped"
	// startChildTool is the tool the agent server attaches to launch a
	// child conversation on itself (POST /api/conversations/{id}/children).
	startChildTool = "start_child_conversation"
	// forkedFromField names a fork's source on session.started: AEP's
	// session.started has no field for it, so it rides vendor-scoped, at
	// metadata like every extra field of a core payload.
	forkedFromField = "x.openhands.forked_from"
	// maxOpenChildren bounds the started children a conversation waits to
	// see stop; a child started past it gets no delegation.subagent.stopped.
	maxOpenChildren = 256
)

// Lineage is where a conversation comes from, as its ConversationInfo and
// the receiver's other conversations show it. Ids are canonical
// (ConversationID).
type Lineage struct {
	// ParentSession is parent_conversation_id: the conversation whose agent
	// started this one.
	ParentSession string
	// ParentRun is the parent's run open when this conversation was first
	// seen; "" when not known (the parent is not observed here, or was not
	// running).
	ParentRun string
	// ForkedFrom is forked_from_conversation_id; ForkedAt is
	// forked_from_event_id, "" for a fork of the whole conversation.
	ForkedFrom, ForkedAt string
}

// putLineage puts the conversation's lineage on its session.started:
// parent {session, run?, agent} (AEP-0002) for a child, and
// x.openhands.forked_from {session, event?} for a fork.
func (c *Conversation) putLineage(out *aep.Event) {
	l := c.cfg.Lineage
	if l.ParentSession != "" {
		// The parent runs on the same agent server, so under the same agent.
		parent := map[string]any{"session": l.ParentSession, "agent": c.cfg.Agent}
		if l.ParentRun != "" {
			parent["run"] = l.ParentRun
		}
		set(out, "parent", parent)
	}
	if l.ForkedFrom != "" {
		from := map[string]any{"session": l.ForkedFrom}
		if l.ForkedAt != "" {
			from["event"] = l.ForkedAt
		}
		set(out, forkedFromField, from)
	}
}

// subagentStarted follows the tool.completed of a start_child_conversation
// call whose observation names the child: delegation.subagent.started in
// this (the parent's) session and run, cause-linked to that tool.completed,
// with the call at data.tool so it sits in the call's span. An observation
// without a valid child id (a failed launch) adds nothing.
func (c *Conversation) subagentStarted(e *emission, f, obs map[string]any, o origin, completed *aep.Event) {
	child, ok := ConversationID(str(obs, "conversation_id"))
	if !ok {
		return
	}
	out := e.emit(typeSubagentStarted, o)
	out.Cause = completed.ID
	set(out, "child", c.childRef(child))
	set(out, "tool", toolRef(f)) // f's tool_name is startChildTool
	if _, known := c.s.Children[child]; known || len(c.s.Children) < maxOpenChildren {
		if c.s.Children == nil {
			c.s.Children = make(map[string]string)
		}
		c.s.Children[child] = out.ID
	}
}

// SubagentStopped returns delegation.subagent.stopped when the tree shows a
// child this conversation started stopped: its execution status is
// finished, error, stuck or deleting (the status rides at data.status). It
// returns nil for any other status, a child it did not announce (or
// already reported stopped), and once the session ended. The event sits in
// the parent's open run, if any, and names the started event as its cause.
func (c *Conversation) SubagentStopped(child, status string, at time.Time) *aep.Event {
	started, ok := c.s.Children[child]
	if c.s.Ended || !ok || !StopsChild(status) {
		return nil
	}
	delete(c.s.Children, child)
	e := c.begin(at)
	out := e.emit(typeSubagentStopped, origin{key: "child " + child, at: at})
	out.Cause = started
	set(out, "child", c.childRef(child))
	set(out, "status", status)
	return out
}

// Parent is the conversation that started this one (its lineage's
// ParentSession), "" for a root or when not known.
func (c *Conversation) Parent() string { return c.cfg.Lineage.ParentSession }

// StartedChild returns the child a delegation.subagent.started this
// conversation emitted announces, while the conversation waits to see the
// child stop; false for any other event. It reads the conversation's
// state, not the event's data, which capture level none leaves out.
func (c *Conversation) StartedChild(ev *aep.Event) (string, bool) {
	if ev.Type != typeSubagentStarted {
		return "", false
	}
	for child, started := range c.s.Children {
		if started == ev.ID {
			return child, true
		}
	}
	return "", false
}

// StopsChild reports whether a child conversation in status has stopped,
// as delegation.subagent.stopped reports it.
func StopsChild(status string) bool {
	switch status {
	case StatusFinished, StatusError, StatusStuck, StatusDeleting:
		return true
	}
	return false
}

// childRef names a child session; it runs under the same agent.
func (c *Conversation) childRef(child string) map[string]any {
	return map[string]any{"session": child, "agent": c.cfg.Agent}
}
