package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"errors"
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
	health       func(server string, err error)
	tel          *telemetry
	logger       *zap.Logger
	rl           *ratelog.Logger

	convs map[string]*conversation
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
		w.health(w.api.name, err)
		w.rl.Error("search", "conversation search failed", zap.Error(err))
		return
	}
	w.health(w.api.name, nil)
	listed := make(map[string]bool, len(infos))
	for _, info := range infos {
		if listed[info.ID] || !w.shard.owns(info.ID) {
			continue // a server that lists one id twice; another replica's
		}
		listed[info.ID] = true
		w.observe(ctx, info)
	}
	for id, c := range w.convs {
		if !listed[id] {
			w.endSession(ctx, c)
		}
	}
}

func (w *serverWatch) observe(ctx context.Context, info conversationInfo) {
	c, known := w.convs[info.ID]
	switch {
	case !known && w.ended.has(info.ID):
		return
	case !known && info.ExecutionStatus == "deleting":
		return // never observed, already going: nothing to say
	case !known:
		var err error
		if c, err = w.newSession(info, nil, w); err != nil {
			w.rl.Error("session", "cannot observe conversation", zap.String("conversation", info.ID), zap.Error(err))
			return
		}
		w.convs[info.ID] = c
		c.begin(ctx)
		c.attach(ctx)
	case info.ExecutionStatus == "deleting":
		c.info = info
		w.endSession(ctx, c)
	case !c.attached() && (c.exit == nil || !errors.Is(c.exit, errIdleDetached) || moved(c.info, info)):
		// Re-attach what idled out once it moves, and what failed fatally
		// once discovery lists it again.
		c.info = info
		c.attach(ctx)
	default:
		c.info = info
	}
}

// moved reports whether search shows activity since the last look.
func moved(before, now conversationInfo) bool {
	return before.UpdatedAt != now.UpdatedAt || before.ExecutionStatus != now.ExecutionStatus
}

func (w *serverWatch) endSession(ctx context.Context, c *conversation) {
	c.end(ctx)
	delete(w.convs, c.id)
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
		w.health(w.api.name, err)
	}
}
