package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// count counts a decoded vendor event, and the numbers in it that ride as
// text because no float64 holds them.
func (s *session) count(ctx context.Context, ev mapping.Event) {
	s.tel.vendorEvent(ev.Kind())
	if n := ev.NumbersAsText(); n > 0 {
		s.tel.numbersAsText.Add(ctx, int64(n))
		s.rl.Warn("numbers:"+s.id, "an agent-server event has numbers beyond float64 range; they ride as strings of their digits",
			zap.String("conversation", s.id), zap.String("vendor_event_id", ev.ID()), zap.Int("numbers", n))
	}
}

// undecodableLocked puts x.openhands.frame.undecodable, naming the size and
// the reason, never the content, in place of a frame or event of size bytes
// that cannot be decoded (reason: mapping.UndecodableFrame or
// UndecodableEvent), before anything is sequenced: the session shows the
// gap, and seq has none.
func (s *session) undecodableLocked(ctx context.Context, reason string, size int, err error) {
	s.tel.decodeError(ctx, reason)
	s.rl.Error("decode:"+s.id, "cannot decode agent-server input; emitting x.openhands.frame.undecodable in its place",
		zap.String("conversation", s.id), zap.String("reason", reason), zap.Int("size_bytes", size), zap.Error(err))
	out := s.mapper.Undecodable(mapping.Undecodable{Size: int64(size), Reason: reason}, time.Now())
	s.queueLocked(mapping.Event{}, out)
}

// isRepeatLocked reports whether ev was already processed. Only a stored
// event can repeat: on the legacy socket across the resume margin and the
// attach's buffered frames, on the session socket when the server sent it
// as transient before it was persisted and later replays it as durable.
func (s *session) isRepeatLocked(ev mapping.Event, how delivery) bool {
	switch {
	case how == durableFrame:
		return s.overlap.retire(ev.ID())
	case how == webhookPush:
		return false // checked against either channel by pushedBeforeLocked
	case ev.Transient():
		return false // snapshots, deltas, socket errors: never stored, never repeated
	default:
		return !s.overlap.add(ev.ID(), ev.Timestamp())
	}
}

// noteStoredLocked records that a new stored event, stamped ts, was
// processed: the resume point and the measure of progress move.
func (s *session) noteStoredLocked(ts string) {
	s.durable.Cursor.ResumeTS = max(s.durable.Cursor.ResumeTS, ts)
	s.stored++
}

// queueLocked is the one way an event enters the session's stream: out,
// what ev was mapped to (the zero Event for what the receiver, the gate
// or search makes on its own; mapping.At for one at a vendor time), goes
// through the decorator, which puts a run.finished it holds ahead of out,
// or holds out's own, and waits in mapped for flushLocked. An append that
// skipped it would overtake a held run.finished (a child's stop once did).
// s.mu must be held.
func (s *session) queueLocked(ev mapping.Event, out []*aep.Event) {
	s.mapped = append(s.mapped, s.decorator.Decorate(ev, out)...)
}

// processLocked dedupes, maps and batches one decoded event.
func (s *session) processLocked(ctx context.Context, ev mapping.Event, how delivery, connectSnapshot bool) {
	if s.mapper.Ended() {
		return
	}
	if s.isRepeatLocked(ev, how) || s.pushedBeforeLocked(ev, how) {
		s.tel.duplicates.Add(ctx, 1)
		return
	}
	now := time.Now()
	s.lastSeen = now
	// A pushed event is not the socket's progress, nor its resume point,
	// unless there is no socket (webhook.only).
	if (how != webhookPush || s.pushOnly) && (how == durableFrame || how == legacyHistory || !ev.Transient()) {
		s.noteStoredLocked(ev.Timestamp())
	}
	prev := s.mapper.Status()
	var out []*aep.Event
	if connectSnapshot || ev.Transient() && predates(ev.Timestamp(), s.durable.Cursor.ResumeTS) {
		// A snapshot older than a persisted event already mapped (one that
		// waited in the socket buffer while the legacy history was paged)
		// must not move the status back: it is mapped as stale.
		out = s.mapper.MapConnectSnapshot(ev, now)
	} else {
		out = s.mapper.Map(ev, now)
	}
	mapped := out
	out = s.notes.Decorate(prev, out, now)
	if s.notes != nil {
		if text, ok := userText(ev); ok {
			out = s.notes.Said(text, out, now)
		}
	}
	s.queueLocked(ev, out)
	s.linkLocked(ev, mapped)
	s.noteTreeLocked(prev, mapped)
	s.tel.mapped(ctx, time.Since(now))
	if len(s.mapped) >= maxBatchEvents {
		s.flushLocked(ctx)
	}
}

// extendsLocked reports whether ev follows what was processed: its parent
// was, or it is a root and nothing was, not even before a restart (the
// socket cursor is stored; vendorIDs is not).
func (s *session) extendsLocked(ev mapping.Event) bool {
	if parent := parentID(ev); parent != "" {
		return s.vendorIDs.Has(parent)
	}
	return s.vendorIDs.Len() == 0 && s.durable.Cursor.DurableSeq < 0 && s.durable.Cursor.ResumeTS == ""
}

// pushedBeforeLocked reports whether ev, a stored event, was already
// processed from the other channel. A socket's copy of what the webhook
// brought first is still the socket's progress (noteSearch must not take
// it for stalled) and moves its resume point. Without a webhook the
// socket's own dedupe (seq, overlapIDs) is the whole story.
func (s *session) pushedBeforeLocked(ev mapping.Event, how delivery) bool {
	if !s.webhook || ev.Transient() || !s.vendorIDs.Has(ev.ID()) {
		return false
	}
	if how != webhookPush {
		s.noteStoredLocked(ev.Timestamp())
	}
	return true
}

// noteTreeLocked queues what this session's stream just showed of the
// tree: its own status stopping it as a child, and each child it
// announced (which may have stopped before the announcement was mapped).
func (s *session) noteTreeLocked(prev string, mapped []*aep.Event) {
	if status := s.mapper.Status(); status != prev && mapping.StopsChild(status) && s.mapper.Parent() != "" {
		s.tree.add(treeMove{parent: s.mapper.Parent(), child: s.id, status: status})
	}
	for _, ev := range mapped {
		if child, ok := s.mapper.StartedChild(ev); ok {
			s.tree.add(treeMove{parent: s.id, child: child})
		}
	}
}

// linkLocked sets, on the AEP events mapped from ev that are still without
// a cause once decorated, the AEP event its parent_id was mapped to, and
// records ev's own. The answers of tool calls and attention requests are
// left alone: their cause is what they answer (mapping.Decorator), and it
// keys their spans (internal/aep/runtrace).
func (s *session) linkLocked(ev mapping.Event, mapped []*aep.Event) {
	if ev.Transient() {
		return // never stored, never a parent
	}
	first := ""
	if len(mapped) > 0 {
		first = mapped[0].ID
	}
	s.vendorIDs.Put(ev.ID(), first)
	parent := s.vendorIDs.Get(parentID(ev))
	if parent == "" {
		return
	}
	for _, out := range mapped {
		if out.Cause == "" && !answers(out.Type) {
			out.Cause = parent
		}
	}
}
