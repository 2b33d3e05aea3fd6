package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// The conversation tree, from what search shows (ConversationInfo's
// parent_conversation_id, forked_from_conversation_id,
// forked_from_event_id) and what the parent's own stream shows (the
// start_child_conversation observation, mapped by the mapping). Nothing
// waits for anything: a child may be discovered before or after its
// parent, and its parent may be another replica's.

// lineage is where a conversation comes from, for its session.started.
// The parent's run is named only when this replica observes the parent
// and has seen a run of it open (best effort: the parent may be another
// replica's, not attached yet, or its socket behind search).
func (w *serverWatch) lineage(info conversationInfo) mapping.Lineage {
	l := mapping.Lineage{
		ParentSession: w.treeID(info.ID, "parent_conversation_id", info.ParentConversationID),
		ForkedFrom:    w.treeID(info.ID, "forked_from_conversation_id", info.ForkedFromConversationID),
	}
	if l.ForkedFrom != "" {
		l.ForkedAt = w.treeID(info.ID, "forked_from_event_id", info.ForkedFromEventID)
	}
	if parent, ok := w.convs[l.ParentSession]; ok && l.ParentSession != "" {
		l.ParentRun = parent.session.run()
	}
	return l
}

// treeID checks an id of the tree as served: a UUID (the server's ids,
// conversations' and events' alike), else it is left out with a warning,
// so a hostile server cannot write arbitrary text into the tree.
func (w *serverWatch) treeID(conversation, field, id string) string {
	if id == "" {
		return ""
	}
	canonical, ok := mapping.ConversationID(id)
	if !ok {
		w.rl.Warn("tree:"+field, "a conversation's tree field is not a UUID; the conversation is observed without it",
			zap.String("conversation", conversation), zap.String("field", field), zap.String("value", quoteID(id)))
	}
	return canonical
}

// noteChild hands what search shows of a child conversation, whichever
// replica observes the child, to its parent when this replica observes
// the parent: the parent's delegation.subagent.stopped comes with the
// first poll that shows the child stopped.
func (w *serverWatch) noteChild(ctx context.Context, info conversationInfo) {
	if info.ParentConversationID == "" {
		return
	}
	if id, ok := mapping.ConversationID(info.ParentConversationID); ok {
		if parent, observed := w.convs[id]; observed {
			parent.session.childStatus(ctx, info.ID, info.ExecutionStatus)
		}
	}
}

// childStatus emits delegation.subagent.stopped when the mapping says the
// child's status stops it (once per child it announced started),
// decorated like every other event: its traceparent, and after a
// run.finished the decorator holds.
func (s *session) childStatus(ctx context.Context, child, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.mapper.SubagentStopped(child, status, time.Now())
	if ev == nil {
		return
	}
	s.mapped = append(s.mapped, s.decorator.Decorate(mapping.Event{}, []*aep.Event{ev})...)
	s.flushLocked(ctx)
}

// run is the session's open run, "" when none is open.
func (s *session) run() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mapper.Run()
}
