package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
)

// serverWatch discovers one agent server's conversations by polling
// search, and owns their conversation objects: it is the only goroutine
// that creates, attaches, detaches and ends them.
type serverWatch struct {
	api          *agentServer
	pollInterval time.Duration
	idleDetach   time.Duration
	reconnect    backoff.Config
	shard        ShardConfig
	journal      *journal // nil without storage
	newSession   func(info conversationInfo, restored *durableState, w *serverWatch) (*conversation, error)
	health       func(server string, aspect healthAspect, err error)
	tel          *telemetry
	logger       *zap.Logger
	rl           *ratelog.Logger
	// maxConversations bounds the attached conversations (sockets).
	maxConversations int

	convs map[string]*conversation
	// index is where the control gate finds them.
	index *sessionIndex
	// ended remembers conversations whose session ended, so that one seen
	// again is not given a second session.started / session.ended.
	ended *recentIDs
}

func (w *serverWatch) run(ctx context.Context) {
	defer w.stopAll()
	w.restore(ctx)
	t := time.NewTicker(w.pollInterval)
	defer t.Stop()
	for {
		w.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll runs one discovery round. Only a complete, successful search may end
// sessions: a failed or partial one changes nothing.
func (w *serverWatch) poll(ctx context.Context) {
	infos, err := w.api.searchConversations(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		w.health(w.api.name, healthSearch, err)
		w.rl.Error("search", "conversation search failed", zap.Error(err))
		return
	}
	w.health(w.api.name, healthSearch, nil)
	listed := make(map[string]bool, len(infos))
	var waiting []conversationInfo
	for _, info := range infos {
		if listed[info.ID] || !w.shard.owns(info.ID) {
			continue // a server that lists one id twice; another replica's
		}
		listed[info.ID] = true
		if w.observe(ctx, info) {
			waiting = append(waiting, info)
		}
	}
	for id, c := range w.convs {
		if !listed[id] {
			w.endSession(ctx, c)
		}
	}
	w.attachWaiting(ctx, waiting)
}

// observe takes in what search shows of one conversation and reports
// whether it wants a socket: new, or detached and due to re-attach.
func (w *serverWatch) observe(ctx context.Context, info conversationInfo) (wantsSocket bool) {
	c, known := w.convs[info.ID]
	switch {
	case !known && w.ended.has(info.ID):
		return false
	case !known && info.ExecutionStatus == "deleting":
		return false // never observed, already going: nothing to say
	case !known:
		return true
	case info.ExecutionStatus == "deleting":
		c.info = info
		w.endSession(ctx, c)
		return false
	case !c.attached() && (c.exit == nil || !errors.Is(c.exit, errIdleDetached) || moved(c.info, info)):
		// Re-attach what idled out once it moves, and what failed fatally
		// once discovery lists it again.
		c.info = info
		return true
	default:
		c.noteSearch(info, time.Now())
		c.info = info
		return false
	}
}

// attachWaiting gives the free slots, up to maxConversations attached, to
// the waiting conversations most recently updated first. A conversation
// first seen starts its session only when it gets a slot. The rest wait
// for the next round, reported as overflow.
func (w *serverWatch) attachWaiting(ctx context.Context, waiting []conversationInfo) {
	free := w.maxConversations
	for _, c := range w.convs {
		if c.attached() {
			free--
		}
	}
	slices.SortStableFunc(waiting, func(a, b conversationInfo) int {
		return cmp.Compare(updatedAt(b), updatedAt(a))
	})
	overflow := 0
	for _, info := range waiting {
		if free <= 0 {
			overflow++
			continue
		}
		c, known := w.convs[info.ID]
		if !known {
			var err error
			if c, err = w.newSession(info, nil, w); err != nil {
				w.rl.Error("session", "cannot observe conversation", zap.String("conversation", info.ID), zap.Error(err))
				continue
			}
			w.convs[info.ID] = c
			w.index.add(c)
			c.begin(ctx)
		}
		c.attach(ctx)
		free--
	}
	w.reportOverflow(ctx, overflow)
}

// reportOverflow publishes the conversations waiting for a slot: as a
// metric, a recoverable component status and a rate-limited warning.
func (w *serverWatch) reportOverflow(ctx context.Context, waiting int) {
	w.tel.overflow(ctx, w.api.name, waiting)
	if waiting == 0 {
		w.health(w.api.name, healthCapacity, nil)
		return
	}
	err := fmt.Errorf("%d conversations wait for a socket: max_conversations (%d) reached", waiting, w.maxConversations)
	w.health(w.api.name, healthCapacity, err)
	w.rl.Warn("overflow", "conversations wait for a socket; they attach as slots free up, most recently updated first",
		zap.Int("waiting", waiting), zap.Int("max_conversations", w.maxConversations))
}

// updatedAt orders conversations by their last update; an unreadable one
// sorts last.
func updatedAt(info conversationInfo) int64 {
	t, err := time.Parse(time.RFC3339Nano, info.UpdatedAt)
	if err != nil {
		return math.MinInt64
	}
	return t.UnixNano()
}

// moved reports whether search shows activity since the last look.
func moved(before, now conversationInfo) bool {
	return before.UpdatedAt != now.UpdatedAt || before.ExecutionStatus != now.ExecutionStatus
}

func (w *serverWatch) endSession(ctx context.Context, c *conversation) {
	c.end(ctx)
	delete(w.convs, c.id)
	w.index.remove(c)
	w.ended.add(c.id)
}

// restore brings back, before the first poll, the conversations of this
// server the storage holds. Each batch that may not have left is sent
// again first (even for a conversation resharded away: it belongs to this
// replica's session). Then, within this shard, ended sessions are
// remembered as ended and the others wait, unattached, for the first poll
// to attach or end them. A conversation whose state cannot be read is
// logged and starts fresh when search lists it, in a new generation (as
// without storage).
func (w *serverWatch) restore(ctx context.Context) {
	if w.journal == nil {
		return
	}
	stored, err := w.journal.load(ctx)
	if err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.logger.Error("cannot read this server's conversation index from storage; its conversations start fresh", zap.Error(err))
		return
	}
	for _, s := range stored {
		if s.err != nil {
			w.tel.storageErrors.Add(ctx, 1)
			w.logger.Error("cannot read a conversation's state from storage; it starts fresh",
				zap.String("conversation", s.id), zap.Error(s.err))
			continue
		}
		c, err := w.newSession(conversationInfo{ID: s.id}, &s.state, w)
		if err != nil {
			w.logger.Error("cannot restore conversation", zap.String("conversation", s.id), zap.Error(err))
			continue
		}
		if s.pending != nil {
			w.tel.batchesResent.Add(ctx, 1)
			c.mu.Lock()
			c.handOnLocked(ctx, *s.pending)
			c.markDoneLocked(ctx)
			c.mu.Unlock()
		}
		if !w.shard.owns(s.id) {
			continue // resharded away: its new owner observes it
		}
		if s.state.Mapping.Ended {
			w.ended.add(s.id)
			continue
		}
		w.convs[s.id] = c
		w.index.add(c)
	}
	w.logger.Info("restored conversations from storage", zap.Int("conversations", len(w.convs)))
}

func (w *serverWatch) stopAll() {
	for _, c := range w.convs {
		c.detach()
	}
}

// reportConversationFatal surfaces a conversation the server refused.
func (w *serverWatch) reportConversationFatal(err error) {
	if errors.Is(err, errAuthRejected) {
		w.health(w.api.name, healthSearch, err)
	}
}
