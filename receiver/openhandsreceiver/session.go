package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// session is one observed conversation's AEP session: everything that
// maps and emits it, under one lock (mu), so seq order is emission order.
// What of it survives a restart is one value, durable (state.go), which
// its mapper, decorator and emitter mutate in place: storing it is
// copying it, restoring it is building a session on it (newSession). The
// conversation (conversation.go) feeds it from its socket; the webhook,
// discovery and the control gate feed it too, each under mu.
type session struct {
	id string
	*sessionSettings

	mu      sync.Mutex
	durable durableState
	mapper  *mapping.Conversation
	// decorator adds what the pinned field maps leave out (cause,
	// durations, usage, traceparent) to everything the mapper emits.
	decorator *mapping.Decorator
	notes     *openhandscontrol.Notes // the control gate's state; nil without one
	emitter   *sessionEmitter
	overlap   *overlapIDs  // the ids a resume or an attach's buffer can repeat
	vendorIDs *vendorIDs   // the last stored events processed: lineage, and the webhook's dedupe
	metadata  metaShown    // the title as the webhook last showed it
	lastSeen  time.Time    // when the last vendor event arrived
	stored    uint64       // new stored events processed, the measure of progress
	mapped    []*aep.Event // mapped, not yet emitted (flushLocked)
	consumed  bool         // the pipeline took the stored pending batch; markDoneLocked is to delete it
	// usageWait is armed while a run.finished waits for its usage;
	// usageWaits counts arms and disarms, to tell a stale one.
	usageWait  *time.Timer
	usageWaits uint64
	// storedControl is the control state in storage, once controlStored.
	storedControl openhandscontrol.State
	controlStored bool
}

// sessionSettings is what the sessions of one agent server share.
type sessionSettings struct {
	server   *serverClient // where the conversations live: Server, and which claim a session is
	journal  *journal      // nil without storage
	next     consumer.Logs
	resource pcommon.Resource // template of every batch's resource
	tel      *telemetry
	logger   *zap.Logger
	rl       *ratelog.Logger
	retry    backoff.Config // how a refused write-ahead or consume is retried
	// mapping is the mapping configuration of conversation id in epoch.
	mapping func(id string, epoch int64, lineage mapping.Lineage) mapping.Config
	// newNotes makes a session's control state; nil without a gate.
	newNotes openhandscontrol.NewNotesFunc
	// vendorWindow sizes vendorIDs; webhook: pushes may bring the
	// conversation's events (pushedBeforeLocked); pushOnly: they and
	// events/search are its only channels (webhook.only).
	vendorWindow      int
	webhook, pushOnly bool
	// tree takes what the streams show of the conversation tree to the
	// watch goroutine (tree.go).
	tree *treeMoves
}

// freshState is the durable state of a session first seen in epoch.
func freshState(epoch int64) durableState {
	return durableState{position: position{Epoch: epoch}, Cursor: cursor{DurableSeq: -1}}
}

// newSession builds the session of conversation id in state: fresh
// (freshState) or restored from storage.
func newSession(set *sessionSettings, id string, lineage mapping.Lineage, state durableState) (*session, error) {
	s := &session{id: id, sessionSettings: set, durable: state, overlap: newOverlapIDs(), vendorIDs: newVendorIDs(set.vendorWindow)}
	var err error
	if s.mapper, err = mapping.NewConversation(set.mapping(id, state.Epoch, lineage), &s.durable.Mapping); err != nil {
		return nil, err
	}
	s.decorator = mapping.NewDecorator(&s.durable.Decoration)
	s.emitter = &sessionEmitter{next: set.next, resource: set.resource, pos: &s.durable.position, retry: set.retry, tel: set.tel, logger: set.logger}
	// The overlap window and the control notes keep their own form; they
	// are taken into durable when it is stored (snapshotLocked).
	for _, id := range state.Cursor.Recent {
		s.overlap.add(id, state.Cursor.ResumeTS)
	}
	if set.newNotes != nil {
		s.notes = set.newNotes(s.mapper, state.Control)
	}
	s.durable.Cursor.Recent, s.durable.Control = nil, openhandscontrol.State{}
	return s, nil
}

// begin emits session.started on first sight of a conversation created
// at createdAt (RFC 3339; now if unreadable).
func (s *session) begin(ctx context.Context, createdAt string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	created, err := time.Parse(time.RFC3339Nano, createdAt)
	if err != nil {
		created = time.Now()
	}
	if start := s.mapper.Start(created, time.Now()); start != nil {
		s.mapped = append(s.mapped, s.decorator.Decorate(mapping.Event{}, []*aep.Event{start})...)
	}
	s.flushLocked(ctx)
}

// end closes the session and reports whether its session.ended was
// handed on.
func (s *session) end(ctx context.Context) (handedOn bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.durable.Cursor.ResumeTS
	out := s.mapper.End(time.Now(), ts) // nil once ended
	s.mapped = append(s.mapped, s.decorator.DecorateEnd(ts, out)...)
	return s.flushLocked(ctx)
}

// resumeCursor is the stored event a socket resumes after: its seq (the
// last /sockets/session seq processed, -1 before any) and its vendor id.
func (s *session) resumeCursor() (seq int64, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable.Cursor.DurableSeq, s.durable.Cursor.DurableID
}

// fromEnd reports whether the next attach skips the log it finds
// (cursor.FromEnd).
func (s *session) fromEnd() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable.Cursor.FromEnd
}

// skipHistory puts the cursor of a conversation whose history is not
// read (cursor.FromEnd) at the end of the log its attach found: the
// session socket's sync through_seq (-1 for an empty log), or the legacy
// socket's subscribe timestamp (seq -1, ts "" when unknown).
func (s *session) skipHistory(throughSeq int64, ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.durable.Cursor.FromEnd {
		return
	}
	s.durable.Cursor.FromEnd = false
	s.durable.Cursor.DurableSeq = max(s.durable.Cursor.DurableSeq, throughSeq)
	s.durable.Cursor.ResumeTS = max(s.durable.Cursor.ResumeTS, ts)
}

// resumeTS is the newest vendor timestamp of a persisted event processed.
func (s *session) resumeTS() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable.Cursor.ResumeTS
}

// holdOverlap and overlapHistoryDone bracket a legacy attach's history
// (overlapIDs.hold, historyDone).
func (s *session) holdOverlap(subscribedTS string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overlap.hold(subscribedTS)
}

func (s *session) overlapHistoryDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overlap.historyDone()
}

// progress is what discovery compares with search: the stored events
// processed so far and the status they left.
func (s *session) progress() (stored uint64, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored, s.mapper.Status()
}

func (s *session) storedCount() uint64 {
	stored, _ := s.progress()
	return stored
}

// idleExpired reports whether the conversation has sat idle or terminal,
// with no event, for at least d.
func (s *session) idleExpired(d time.Duration) bool {
	since, idle := s.quietSince()
	return idle && time.Since(since) >= d
}

// quietSince is when the last vendor event arrived, and whether the
// status it left is idle or terminal.
func (s *session) quietSince() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen, mapping.ClosesRuns(s.mapper.Status())
}

// frameDone emits what is mapped, unless another frame is waiting to join
// its batch, and keeps the usage wait in step with the decorator.
func (s *session) frameDone(ctx context.Context, another bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !another {
		s.flushLocked(ctx) // nothing more waiting: emit what is mapped
	}
	s.syncUsageWaitLocked(ctx)
}

// detached emits what is mapped when a socket ends, and deletes the stored
// pending batch the pipeline took: an orderly restart sends nothing again.
func (s *session) detached(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopUsageWaitLocked()
	s.flushLocked(ctx)
	s.markDoneLocked(ctx)
}

// syncUsageWaitLocked arms the wait of a run.finished the decorator holds
// for its usage, keeps an armed one, or disarms it once nothing is held.
func (s *session) syncUsageWaitLocked(ctx context.Context) {
	switch {
	case !s.decorator.Holding():
		s.stopUsageWaitLocked()
	case s.usageWait == nil:
		s.usageWaits++
		armed := s.usageWaits
		s.usageWait = time.AfterFunc(usageWait, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.usageWaits == armed { // not disarmed meanwhile
				s.releaseHeldLocked(ctx)
			}
		})
	}
}

func (s *session) stopUsageWaitLocked() {
	if s.usageWait != nil {
		s.usageWait.Stop()
		s.usageWait = nil
		s.usageWaits++
	}
}

// releaseHeldLocked emits a run.finished that waited usageWait for its
// usage.
func (s *session) releaseHeldLocked(ctx context.Context) {
	s.usageWait = nil
	s.mapped = append(s.mapped, s.decorator.Release()...)
	s.flushLocked(ctx)
}

// resend hands on again a batch a crash may have kept from leaving, and
// reports whether the pipeline took it. Its stored copy is deleted once
// taken, unless the session ended: forgetting the session removes it.
func (s *session) resend(ctx context.Context, pending plog.Logs) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	handedOn := s.consumeLocked(ctx, pending)
	if !s.mapper.Ended() {
		s.markDoneLocked(ctx)
	}
	return handedOn
}

// handleDurable processes one stored event of the session socket at seq,
// size bytes, decoded or not (err). The seq cursor alone orders and
// dedupes stored events: a seq at or below it is a redelivery.
func (s *session) handleDurable(ctx context.Context, seq int64, size int, ev mapping.Event, err error) {
	if err == nil {
		s.count(ctx, ev) // duplicates included
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.durable.Cursor.DurableSeq {
		s.tel.duplicates.Add(ctx, 1)
		return
	}
	s.durable.Cursor.DurableSeq, s.durable.Cursor.DurableID = seq, ev.ID()
	if err != nil {
		s.undecodableLocked(ctx, mapping.UndecodableEvent, size, err)
		return
	}
	s.processLocked(ctx, ev, durableFrame, false)
}

// oversize puts, at seq, the visible x.openhands.event.oversize naming a
// stored event too large to hold in its place.
func (s *session) oversize(seq int64, placeholder mapping.Oversize) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.durable.Cursor.DurableSeq, s.durable.Cursor.DurableID = seq, placeholder.ID
	s.lastSeen = time.Now()
	s.noteStoredLocked(placeholder.Timestamp)
	s.mapped = append(s.mapped, s.decorator.Decorate(placeholder.Event(), s.mapper.Oversize(placeholder, time.Now()))...)
}

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

func (s *session) undecodable(ctx context.Context, reason string, size int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.undecodableLocked(ctx, reason, size, err)
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
	s.mapped = append(s.mapped, s.decorator.Decorate(mapping.Event{}, out)...)
}

// delivery is how an event reached the receiver, which decides whether it
// can be a repeat.
type delivery int

const (
	durableFrame   delivery = iota // session socket, stored, deduped by seq
	transientFrame                 // session socket, not (yet) stored
	legacyHistory                  // legacy attach, REST history page
	legacyLive                     // legacy socket frame
	webhookPush                    // an event batch the server POSTed (webhook.go)
)

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

func (s *session) process(ctx context.Context, ev mapping.Event, how delivery, connectSnapshot bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.processLocked(ctx, ev, how, connectSnapshot)
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
	if text, ok := userText(ev); ok && s.notes != nil {
		out = s.notes.Said(text, out, now)
	}
	out = s.decorator.Decorate(ev, out)
	s.linkLocked(ev, mapped)
	s.noteTreeLocked(prev, mapped)
	s.tel.mapped(ctx, time.Since(now))
	s.mapped = append(s.mapped, out...)
	if len(s.mapped) >= maxBatchEvents {
		s.flushLocked(ctx)
	}
}

// flush emits what has been mapped and not yet emitted.
func (s *session) flush(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(ctx)
}

// flushLocked reports whether what was mapped, if anything, was handed on.
func (s *session) flushLocked(ctx context.Context) bool {
	if len(s.mapped) == 0 {
		return true
	}
	events := s.mapped
	s.mapped = nil
	return s.emitLocked(ctx, events)
}

// emitLocked is the one place a session's events leave, in batches
// (flushLocked): every event mapped since the last one. With storage,
// the positioned batch is written ahead together with the state it leads
// to, handed to the pipeline, then marked done; a crash anywhere in
// between re-sends exactly those records on the next start (journal). It
// reports whether they were handed on.
func (s *session) emitLocked(ctx context.Context, events []*aep.Event) bool {
	logs := s.emitter.batch(events)
	if logs.LogRecordCount() == 0 {
		return true
	}
	if err := s.writeAheadLocked(ctx, logs); err != nil {
		s.rl.Error("emit:"+s.id, "could not write AEP events ahead; they are not emitted",
			zap.String("conversation", s.id), zap.Error(err))
		return false
	}
	return s.consumeLocked(ctx, logs)
}

// consumeLocked hands a batch to the pipeline's consumer. A stored batch
// the pipeline took needs no write of its own: the next write-ahead
// replaces it, and markDoneLocked deletes the last one when the
// conversation detaches. Until then a crash sends it again, a legal
// redelivery; one storage write per batch instead of two is what that
// buys. It reports whether the pipeline took the batch.
func (s *session) consumeLocked(ctx context.Context, logs plog.Logs) bool {
	if err := s.emitter.consume(ctx, logs); err != nil {
		s.rl.Error("emit:"+s.id, "could not emit AEP events", zap.String("conversation", s.id), zap.Error(err))
		return false
	}
	s.consumed = s.journal != nil
	return true
}

// markDoneLocked deletes the stored pending batch once the pipeline took
// it, so that an orderly restart sends nothing again.
func (s *session) markDoneLocked(ctx context.Context) {
	if !s.consumed {
		return
	}
	s.consumed = false
	if err := s.journal.done(ctx, s.id); err != nil {
		s.tel.storageErrors.Add(ctx, 1)
		s.rl.Warn("storage:"+s.id, "could not mark a batch done; a restart sends it again",
			zap.String("conversation", s.id), zap.Error(err))
	}
}

// writeAheadLocked persists logs with the state they lead to, retrying a
// failing storage with the reconnect backoff: records leave only once a
// crash can no longer make the receiver map their vendor events again.
func (s *session) writeAheadLocked(ctx context.Context, logs plog.Logs) error {
	if s.journal == nil {
		return nil
	}
	pending, err := encodeBatch(logs)
	if err != nil {
		return err
	}
	state, control := s.snapshotLocked()
	rawControl, err := s.controlChangeLocked(control)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		written, err := s.journal.writeAhead(ctx, s.id, state, rawControl, pending)
		if err == nil {
			s.controlWrittenLocked(control, rawControl)
			s.tel.storageWritten.Add(ctx, int64(written))
			s.consumed = false // the stored batch is this one now
			return nil
		}
		s.tel.storageErrors.Add(ctx, 1)
		s.rl.Warn("storage:"+s.id, "storage refused a write-ahead; retrying", zap.String("conversation", s.id), zap.Error(err))
		if err := s.retry.Sleep(ctx, attempt); err != nil {
			return fmt.Errorf("write-ahead: %w", err)
		}
	}
}
