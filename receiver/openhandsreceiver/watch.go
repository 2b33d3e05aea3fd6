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

	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
)

// serverWatch discovers one agent server's conversations by polling
// search, and owns their conversation objects: it is the only goroutine
// that creates, attaches, detaches and ends them.
type serverWatch struct {
	api          *serverClient
	pollInterval time.Duration
	shard        ShardConfig
	journal      *journal // nil without storage
	// epoch is this process's generation, a new session's epoch.
	epoch int64
	// sessions and attaches are what its conversations are built with
	// (open).
	sessions *sessionSettings
	attaches *attachSettings
	health   func(server string, aspect healthAspect, err error)
	tel      *telemetry
	logger   *zap.Logger
	rl       *ratelog.Logger
	// maxConversations bounds the attached conversations (sockets).
	maxConversations int

	convs map[string]*conversation
	// index is where the control gate finds them.
	index *sessionIndex
	// ended remembers conversations whose session ended, so that one seen
	// again is not given a second session.started / session.ended.
	ended *recentIDs
	// persisted are the conversations of this shard whose state is in
	// storage and that have no object yet: one is built (wake) when search
	// lists it, or ended when a lookup finds it gone. Nil without storage.
	persisted map[string]struct{}
	// round counts discovery rounds; seenIn is the last round in which the
	// server showed each known conversation (listed, or answered by id).
	round  uint64
	seenIn map[string]uint64
	// pushes are the webhook's POSTs for this server (webhook.go); nil
	// without a webhook.
	pushes chan push
}

func (w *serverWatch) run(ctx context.Context) {
	defer w.stopAll()
	w.restore(ctx)
	t := time.NewTicker(w.pollInterval)
	defer t.Stop()
	for {
		w.poll(ctx)
		if !w.awaitPoll(ctx, t.C) {
			return
		}
	}
}

// awaitPoll takes the webhook's pushes until the next poll is due; false
// once ctx ends.
func (w *serverWatch) awaitPoll(ctx context.Context, tick <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case p := <-w.pushes:
			p.reply <- w.pushed(ctx, p)
		case <-w.sessions.tree.signal:
			w.treeMoved(ctx)
		case <-tick:
			return true
		}
	}
}

// poll runs one discovery round. Search lists conversations most recently
// updated first and stops paging once max_conversations of them hold or
// want a socket, so a server listing millions costs a few pages. A known
// conversation the round did not list may be past that cut, or skipped
// between pages (the sort key moves), so its absence proves nothing: it is
// looked up by id (confirmUnlisted), and only the server's word that it is
// gone (404, or status deleting) ends its session. A failed round ends
// nothing; what its pages did show is taken in.
func (w *serverWatch) poll(ctx context.Context) {
	w.round++
	listed := make(map[string]bool)
	var waiting []conversationInfo
	room := w.maxConversations
	err := w.api.searchConversations(ctx, func(items []searchItem) bool {
		for _, item := range items {
			if item.err != nil {
				w.skipItem(ctx, item)
				continue
			}
			info := item.info
			w.noteChild(ctx, info) // its parent may be this replica's
			if listed[info.ID] || !w.shard.owns(info.ID) {
				continue // a server that lists one id twice; another replica's
			}
			listed[info.ID] = true
			wants := w.observe(ctx, info)
			w.seen(info.ID)
			if wants {
				waiting = append(waiting, info)
			}
			if c, known := w.convs[info.ID]; wants || known && c.attached() {
				room--
			}
		}
		return room > 0
	})
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		w.health(w.api.name, healthSearch, err)
		w.rl.Error("search", "conversation search failed", zap.Error(err))
	default:
		w.health(w.api.name, healthSearch, nil)
		waiting = append(waiting, w.confirmUnlisted(ctx, listed)...)
	}
	w.attachWaiting(ctx, waiting)
}

// skipItem reports a search item that cannot be taken in; the rest of its
// page is.
func (w *serverWatch) skipItem(ctx context.Context, item searchItem) {
	w.tel.searchItemSkipped(ctx, w.api.name, item.skip)
	w.rl.Warn("search-item:"+item.skip, "skipped a conversation search item; the others are observed",
		zap.String("reason", item.skip), zap.Error(item.err))
}

// confirmsPerPoll bounds the lookups by id of one round: a server with
// more conversations than max_conversations keeps some known ones out of
// every listing, and each is looked up in turn, the longest unseen first.
const confirmsPerPoll = 10

// confirmUnlisted looks up by id the known conversations this round did
// not list (at most confirmsPerPoll), those only in storage first: a 404
// ends the session; an answer is observed as if listed; a failure changes
// nothing. It returns those that want a socket.
func (w *serverWatch) confirmUnlisted(ctx context.Context, listed map[string]bool) (waiting []conversationInfo) {
	var unlisted []string
	for id := range w.convs {
		if !listed[id] {
			unlisted = append(unlisted, id)
		}
	}
	for id := range w.persisted {
		if !listed[id] {
			unlisted = append(unlisted, id)
		}
	}
	slices.SortFunc(unlisted, func(a, b string) int { return cmp.Compare(w.seenIn[a], w.seenIn[b]) })
	for _, id := range unlisted[:min(len(unlisted), confirmsPerPoll)] {
		info, err := w.api.conversation(ctx, id)
		switch {
		case errors.Is(err, errNotFound):
			w.gone(ctx, id)
		case err != nil:
			w.rl.Warn("lookup", "cannot look up a conversation search did not list; it stays observed",
				zap.String("conversation", id), zap.Error(err))
		default:
			if w.observe(ctx, info) {
				waiting = append(waiting, info)
			}
			w.seen(id)
		}
	}
	return waiting
}

// gone ends the session of a known conversation the server no longer has.
func (w *serverWatch) gone(ctx context.Context, id string) {
	if _, asleep := w.persisted[id]; asleep && w.wake(ctx, conversationInfo{ID: id}) == nil {
		if !w.ended.Has(id) {
			w.forget(ctx, id) // unreadable: no session to end
		}
		return
	}
	w.endSession(ctx, w.convs[id])
}

// seen notes that the server showed the conversation this round.
func (w *serverWatch) seen(id string) {
	if _, known := w.convs[id]; known {
		w.seenIn[id] = w.round
	}
}

// observe takes in what search shows of one conversation and reports
// whether it wants a socket: new, or detached and due to re-attach.
func (w *serverWatch) observe(ctx context.Context, info conversationInfo) (wantsSocket bool) {
	if _, asleep := w.persisted[info.ID]; asleep {
		w.wake(ctx, info)
	}
	c, known := w.convs[info.ID]
	switch {
	case !known && w.ended.Has(info.ID):
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
	free := w.freeSlots()
	slices.SortStableFunc(waiting, func(a, b conversationInfo) int {
		return cmp.Compare(updatedAt(b), updatedAt(a))
	})
	overflow := 0
	for _, info := range waiting {
		if free <= 0 {
			overflow++
			continue
		}
		if w.attachOne(ctx, info) {
			free--
		}
	}
	w.reportOverflow(ctx, overflow)
}

// freeSlots is how many more conversations may attach.
func (w *serverWatch) freeSlots() int {
	free := w.maxConversations
	for _, c := range w.convs {
		if c.attached() {
			free--
		}
	}
	return free
}

// attachOne attaches a conversation, starting its session on first sight,
// and reports whether it did.
func (w *serverWatch) attachOne(ctx context.Context, info conversationInfo) bool {
	c, known := w.convs[info.ID]
	if !known {
		var err error
		if c, err = w.open(info, nil); err != nil {
			w.rl.Error("session", "cannot observe conversation", zap.String("conversation", info.ID), zap.Error(err))
			return false
		}
		w.convs[info.ID] = c
		w.index.add(c.session)
		c.begin(ctx)
	}
	if w.sessions.pushOnly {
		c.backfill(ctx, info)
		return true
	}
	c.attach(ctx)
	return true
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

// endSession ends a conversation's session. Once its session.ended is
// handed on, the conversation leaves storage too.
func (w *serverWatch) endSession(ctx context.Context, c *conversation) {
	handedOn := c.end(ctx)
	delete(w.convs, c.id)
	delete(w.seenIn, c.id)
	w.index.remove(c.session)
	w.ended.add(c.id)
	if handedOn {
		w.forget(ctx, c.id)
	}
}

// forget removes an ended conversation from storage. Should that fail,
// the next start finds its batch or its state and removes it then.
func (w *serverWatch) forget(ctx context.Context, id string) {
	if w.journal == nil {
		return
	}
	if err := w.journal.forget(ctx, id); err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.rl.Warn("storage:"+id, "could not remove an ended conversation from storage; the next start does",
			zap.String("conversation", id), zap.Error(err))
	}
}

// restore reads, before the first poll, this server's index from storage,
// and builds no conversation it does not have to: each batch that may not
// have left is sent again (even for a conversation resharded away: it
// belongs to this replica's session), and a conversation whose session
// ended leaves storage. The others of this shard wait in persisted, as
// ids only, for discovery to list them (wake) or find them gone.
func (w *serverWatch) restore(ctx context.Context) {
	if w.journal == nil {
		return
	}
	index, err := w.journal.load(ctx)
	if err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.logger.Error("cannot read all of this server's conversation index from storage; the conversations it names start fresh", zap.Error(err))
	}
	for _, id := range index.ended {
		w.ended.add(id)
	}
	pending, err := w.journal.pending(ctx, index.live)
	if err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.logger.Error("cannot read the pending batches from storage; those unread are not sent again", zap.Error(err))
	}
	// The objects built to send again are not kept: discovery builds them
	// anew from the state stored with the batch.
	over := make(map[string]bool, len(pending))
	for _, id := range pending {
		over[id] = w.build(ctx, conversationInfo{ID: id}) == nil // ended, or starts fresh
	}
	w.persisted = make(map[string]struct{})
	for _, id := range index.live {
		if !over[id] && w.shard.owns(id) {
			w.persisted[id] = struct{}{}
		}
	}
	w.logger.Info("read the conversation index from storage",
		zap.Int("conversations", len(w.persisted)), zap.Int("batches_resent", len(pending)))
}

// wake builds a conversation from storage when discovery first shows it,
// and returns it, or nil if its session ended or its state cannot be read
// (it then starts fresh).
func (w *serverWatch) wake(ctx context.Context, info conversationInfo) *conversation {
	delete(w.persisted, info.ID)
	c := w.build(ctx, info)
	if c != nil {
		w.convs[info.ID] = c
		w.index.add(c.session)
	}
	return c
}

// build makes the object of a conversation in storage: it sends a pending
// batch again, and removes a conversation whose session ended from
// storage (nil). An unreadable state is logged and counted (nil).
func (w *serverWatch) build(ctx context.Context, info conversationInfo) *conversation {
	s := w.journal.loadConversation(ctx, info.ID)
	if s.err != nil {
		w.tel.storageErrors.Add(ctx, 1)
		w.logger.Error("cannot read a conversation's state from storage; it starts fresh",
			zap.String("conversation", info.ID), zap.Error(s.err))
		return nil
	}
	c, err := w.open(info, &s.state)
	if err != nil {
		w.logger.Error("cannot restore conversation", zap.String("conversation", info.ID), zap.Error(err))
		return nil
	}
	handedOn := true
	if s.pending != nil {
		w.tel.batchesResent.Add(ctx, 1)
		handedOn = c.session.resend(ctx, *s.pending)
	}
	if s.state.Mapping.Ended {
		w.ended.add(info.ID)
		if handedOn {
			w.forget(ctx, info.ID)
		}
		return nil
	}
	return c
}

// open builds the conversation of info: a new session in this process's
// epoch, or the one restored from storage.
func (w *serverWatch) open(info conversationInfo, restored *durableState) (*conversation, error) {
	state := freshState(w.epoch)
	if restored != nil {
		state = *restored
	}
	s, err := newSession(w.sessions, info.ID, w.lineage(info), state)
	if err != nil {
		return nil, err
	}
	return newConversation(w.attaches, info, s), nil
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
