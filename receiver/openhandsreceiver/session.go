package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
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
	created, ok := mapping.ParseVendorTime(createdAt)
	if !ok {
		created = time.Now()
	}
	if start := s.mapper.Start(created, time.Now()); start != nil {
		s.queueLocked(mapping.Event{}, []*aep.Event{start})
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
	s.queueLocked(mapping.At(ts), out)
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
	s.queueLocked(placeholder.Event(), s.mapper.Oversize(placeholder, time.Now()))
}

func (s *session) undecodable(ctx context.Context, reason string, size int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.undecodableLocked(ctx, reason, size, err)
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

func (s *session) process(ctx context.Context, ev mapping.Event, how delivery, connectSnapshot bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.processLocked(ctx, ev, how, connectSnapshot)
}

// flush emits what has been mapped and not yet emitted.
func (s *session) flush(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(ctx)
}

var _ openhandscontrol.Session = (*session)(nil)

// Server implements openhandscontrol.Session: the REST base, key and
// client the receiver observes the conversation with.
func (s *session) Server() openhandscontrol.Server { return s.server.control() }

// Control implements openhandscontrol.Session: what fn returns leaves at
// once, decorated like every other event and after whatever was mapped
// before it, a run.finished the decorator holds included (queueLocked),
// through the one emission path (emitLocked: positions, write-ahead,
// pipeline).
func (s *session) Control(ctx context.Context, fn func(n *openhandscontrol.Notes) []*aep.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queueLocked(mapping.Event{}, fn(s.notes))
	s.flushLocked(ctx)
}

// Resend implements openhandscontrol.Session: the recorded ack goes to the
// pipeline again at its recorded position. It is a redelivery, so it is not
// written ahead: a crash loses at most a re-ack, which the sender's retry
// asks for again.
func (s *session) Resend(ctx context.Context, ev *aep.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(ctx)
	if err := s.emitter.consume(ctx, s.emitter.records([]*aep.Event{ev})); err != nil {
		s.rl.Error("emit:"+s.id, "could not re-send a recorded control ack", zap.String("conversation", s.id), zap.Error(err))
	}
}

// Save implements openhandscontrol.Session: what was mapped leaves, then
// the session's state, its control notes included, is stored alone.
// The batch stored last stays: the state stored with it differs from this
// one only in what emitted nothing.
func (s *session) Save(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(ctx)
	return s.saveStateLocked(ctx)
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
	s.queueLocked(mapping.Event{}, []*aep.Event{ev})
	s.flushLocked(ctx)
}

// run is the session's open run, "" when none is open.
func (s *session) run() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mapper.Run()
}

// extends reports whether ev, a stored event, follows what was processed,
// or was processed itself.
func (s *session) extends(ev mapping.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vendorIDs.Has(ev.ID()) || s.extendsLocked(ev)
}

// noteMetadata emits, as state.delta of the session, the title when it
// differs from the one last seen: on the first ConversationInfo of a
// session if it is set, then each change. The server posts each snapshot
// in a task of its own, so they can arrive out of order; an update moves
// updated_at, and a snapshot older than the newest taken in is stale.
func (s *session) noteMetadata(ctx context.Context, updatedAt string, meta metadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := mapping.ParseVendorTime(updatedAt)
	if ok && at.Before(s.metadata.at) {
		return
	}
	if ok {
		s.metadata.at = at
	}
	value, err := aep.DecodeValue(meta.Title)
	if len(meta.Title) == 0 || err != nil {
		return // absent, or not JSON: nothing to say
	}
	title := compactJSON(meta.Title)
	if s.metadata.titled && s.metadata.title == title || !s.metadata.titled && isEmptyJSON(value) {
		return
	}
	s.metadata.title, s.metadata.titled = title, true
	out := s.mapper.Metadata("title", value, updatedAt, time.Now())
	s.queueLocked(mapping.Event{}, out)
	s.flushLocked(ctx)
}

// metaShown is the metadata a session last showed: the newest updated_at
// taken in, and the title as compact JSON (titled once one was shown).
type metaShown struct {
	at     time.Time
	title  string
	titled bool
}
