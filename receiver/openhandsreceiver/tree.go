package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
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
// the parent: for a child observed elsewhere, the parent's
// delegation.subagent.stopped comes with the first poll that shows the
// child stopped (a child observed here reports it from its own stream:
// treeMoves).
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

// maxTreeMoves bounds the tree moves waiting for the watch goroutine;
// one past it is dropped, and the next poll that shows the child stopped
// reports it.
const maxTreeMoves = 4096

// treeMoves carries what the sessions' streams show of the tree to the
// watch goroutine, which owns the conversations: a child's stream
// reaching a status that stops it, or a parent's announcing a child.
// The server pushes no ConversationInfo when a conversation finishes,
// while the child's own stream shows it within milliseconds; without this
// the parent's delegation.subagent.stopped waited for a poll. The watch
// hands the child's status to its parent (treeMoved) under the parent's
// lock alone: a session never waits for another's lock while holding its
// own, whatever tree a hostile server draws (a cycle included).
type treeMoves struct {
	mu      sync.Mutex
	pending map[treeMove]struct{}
	signal  chan struct{} // holds one value while moves are pending
	rl      *ratelog.Logger
}

// treeMove is a child whose parent may have to report it stopped: with
// the status the child's stream showed, or "" when its parent announced
// it (the child's status is then read from its session).
type treeMove struct{ parent, child, status string }

func newTreeMoves(rl *ratelog.Logger) *treeMoves {
	return &treeMoves{pending: make(map[treeMove]struct{}), signal: make(chan struct{}, 1), rl: rl}
}

// add queues m for the watch goroutine; it never blocks.
func (t *treeMoves) add(m treeMove) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) >= maxTreeMoves {
		t.rl.Warn("tree-moves", "too many child status changes wait for the watch; the next poll reports the dropped one",
			zap.String("parent", m.parent), zap.String("child", m.child))
		return
	}
	t.pending[m] = struct{}{}
	select {
	case t.signal <- struct{}{}:
	default:
	}
}

// take empties the queue.
func (t *treeMoves) take() []treeMove {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]treeMove, 0, len(t.pending))
	for m := range t.pending {
		out = append(out, m)
	}
	clear(t.pending)
	return out
}

// treeMoved hands the queued child statuses to the parents this replica
// observes; a child announced by its parent is looked at only when
// observed here too (else a poll shows its status).
func (w *serverWatch) treeMoved(ctx context.Context) {
	for _, m := range w.sessions.tree.take() {
		parent, observed := w.convs[m.parent]
		if !observed {
			continue
		}
		status := m.status
		if status == "" {
			child, observed := w.convs[m.child]
			if !observed {
				continue
			}
			_, status = child.session.progress()
		}
		parent.session.childStatus(ctx, m.child, status)
	}
}
