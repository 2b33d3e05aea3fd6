package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

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
	s.queueLocked(mapping.Event{}, nil)
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

// snapshotLocked is the session's durable state now, and its control
// state apart: the state's value, with the overlap window's ids, which
// keep their own form, taken in; the control state is stored under a key
// of its own, and only when it changed (controlChangeLocked). The copy
// shares its maps with the live state, so it is encoded before s.mu is
// released. s.mu must be held.
func (s *session) snapshotLocked() (durableState, openhandscontrol.State) {
	state := s.durable
	state.Cursor.Recent = s.overlap.ids()
	return state, s.notes.State()
}

// controlChangeLocked is the encoding of control when it differs from
// the control state last stored, nil when it does not. The first store of
// a session's life always writes it: a state an older release stored
// holds it inline, and the state written next does not. s.mu must be held.
func (s *session) controlChangeLocked(control openhandscontrol.State) ([]byte, error) {
	if s.controlStored && sameControl(control, s.storedControl) {
		return nil, nil
	}
	return encodeControl(control)
}

// controlWrittenLocked notes that control is the control state in
// storage. s.mu must be held.
func (s *session) controlWrittenLocked(control openhandscontrol.State, raw []byte) {
	if raw != nil {
		s.storedControl, s.controlStored = control, true
	}
}

// saveStateLocked stores the session's state alone, between batches
// (openhandscontrol.Session.Save). s.mu must be held.
func (s *session) saveStateLocked(ctx context.Context) error {
	if s.journal == nil {
		return nil
	}
	state, control := s.snapshotLocked()
	raw, err := s.controlChangeLocked(control)
	if err == nil {
		var written int
		if written, err = s.journal.saveState(ctx, s.id, state, raw); err == nil {
			s.controlWrittenLocked(control, raw)
			s.tel.storageWritten.Add(ctx, int64(written))
			return nil
		}
	}
	s.tel.storageErrors.Add(ctx, 1)
	return err
}
