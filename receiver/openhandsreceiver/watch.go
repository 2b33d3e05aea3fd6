package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
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
	// onServer are the ids, of every shard, the server has shown and not
	// said are gone: what its count is compared with.
	onServer map[string]struct{}
	// listedAll is set once a full listing has completed; full is one
	// under way. since is the newest updated_at (Unix ns) the head of the
	// listing has shown: a round lists it only down to there. startedAt
	// is the first since, the server's last update before this start.
	listedAll bool
	full      *fullListing
	since     int64
	startedAt int64
	started   bool // startedAt is set
	// countAhead counts the rounds in a row whose count showed more
	// conversations than onServer holds.
	countAhead int
	// recheckInterval is how often the whole listing is read again,
	// whatever the count says (0: never); lastRecheck is when a full
	// listing last completed.
	recheckInterval time.Duration
	lastRecheck     time.Time
	// startAtEnd is start_at: end; fromEnd are the conversations the
	// server had before this start with no state in storage, whose
	// history, under it, is not read when their session starts.
	startAtEnd bool
	fromEnd    map[string]struct{}
	// waiting are the conversations that want a socket and have none
	// yet, until a slot frees (attachWaiting).
	waiting map[string]conversationInfo
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

// poll runs one discovery round, whose cost to the server follows what
// changed, not how many conversations it holds: search by update, newest
// first, down to what the last round showed (one page when nothing
// moved), then the count. Fewer conversations counted than known means
// some are gone: the whole listing is read at once, oldest created first
// (created_at never moves, so it is not reshuffled while paged), and the
// known conversations it does not show are read by id, 99 a request
// (recheck; the server answers those it no longer has cheaply), and those
// it answers null for end. Every id must be known for the count to mean
// that: at the first round, after countAheadRounds rounds whose count
// shows more than were listed (a conversation that appeared with an old
// updated_at), and every recheck_interval (the server moves no
// updated_at on a status-only change), a full listing is read
// fullPagesPerRound pages a round beside the head. A failed round ends
// nothing; what its pages did show is taken in.
func (w *serverWatch) poll(ctx context.Context) {
	due := w.recheckInterval > 0 && time.Since(w.lastRecheck) >= w.recheckInterval
	if w.full == nil && (!w.listedAll || w.countAhead >= countAheadRounds || due) {
		w.full = newFullListing()
	}
	listed, err := w.listHead(ctx)
	if err == nil && w.full != nil {
		w.attachWaiting(ctx) // what the head shows first, before the full listing's pages
		err = w.listFull(ctx, fullPagesPerRound)
	}
	var count int
	if err == nil {
		count, err = w.api.countConversations(ctx)
	}
	if err == nil && w.full == nil && count < len(w.onServer) {
		w.full = newFullListing() // some are gone: which, the listing shows
		err = w.listFull(ctx, maxSearchPages)
	}
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		w.health(w.api.name, healthSearch, err)
		w.rl.Error("search", "conversation search failed", zap.Error(err))
		w.attachWaiting(ctx)
		return
	}
	w.health(w.api.name, healthSearch, nil)
	switch {
	case w.full != nil && !w.full.done:
		// Not every id is known yet: the count tells nothing.
	case w.full != nil:
		maps.Copy(listed, w.full.listed)
		w.full, w.listedAll, w.countAhead = nil, true, 0
		w.recheck(ctx, listed)
	case count > len(w.onServer):
		w.countAhead++
	default:
		w.countAhead = 0
	}
	w.attachWaiting(ctx)
}

// fullListing is a full listing under way, oldest created first.
type fullListing struct {
	next   string          // the page id it goes on from
	done   bool            // it reached the listing's end
	listed map[string]bool // what it listed of this shard
}

func newFullListing() *fullListing {
	return &fullListing{next: firstPage, listed: make(map[string]bool)}
}

const (
	// countAheadRounds is how many rounds in a row a count above what the
	// listings showed is tolerated (a conversation created between a
	// round's listing and its count is listed the next round) before a
	// full listing looks for what the head of the listing cannot show.
	countAheadRounds = 2
	// fullPagesPerRound bounds the pages of a full listing one round
	// reads: the server sorts every conversation for each.
	fullPagesPerRound = 10
)

// listHead lists search by update, newest first, down to since (one
// page before there is one), takes in what it shows, and returns the ids
// of this shard it listed. since advances only with a listing that
// completed.
func (w *serverWatch) listHead(ctx context.Context) (map[string]bool, error) {
	listed := make(map[string]bool)
	newest := w.since
	_, err := w.api.searchConversations(ctx, byUpdate, "", func(items []searchItem) bool {
		more := w.since != 0
		for _, item := range items {
			if item.err == nil {
				newest = max(newest, updatedAt(item.info))
				more = more && updatedAt(item.info) >= w.since
			}
		}
		if !w.started {
			// What the server last did before this start (0: it had
			// nothing).
			w.startedAt, w.started = newest, true
		}
		w.takeListed(ctx, items, listed)
		return more
	})
	if err == nil {
		w.since = newest
	}
	return listed, err
}

// listFull reads the next pages, at most limit, of the full listing
// under way, and takes in what they show.
func (w *serverWatch) listFull(ctx context.Context, limit int) error {
	pages := 0
	next, err := w.api.searchConversations(ctx, byCreation, w.full.next, func(items []searchItem) bool {
		w.takeListed(ctx, items, w.full.listed)
		pages++
		return pages < limit
	})
	if err == nil {
		w.full.next, w.full.done = next, next == ""
	}
	return err
}

// takeListed takes in the items of a search page, and notes the ids of
// this shard in listed.
func (w *serverWatch) takeListed(ctx context.Context, items []searchItem, listed map[string]bool) {
	for _, item := range items {
		if item.err != nil {
			w.skipItem(ctx, item)
			continue
		}
		info := item.info
		w.onServer[info.ID] = struct{}{}
		w.noteChild(ctx, info) // its parent may be this replica's
		if listed[info.ID] || !w.shard.owns(info.ID) {
			continue // a server that lists one id twice; another replica's
		}
		listed[info.ID] = true
		w.noteFromEnd(info)
		w.take(ctx, info)
	}
}

// noteFromEnd notes, under start_at: end, a conversation the server had
// before this start (created before the newest update the start's first
// listing showed) and that has no state: the history it has now is not
// read.
func (w *serverWatch) noteFromEnd(info conversationInfo) {
	_, known := w.convs[info.ID]
	_, asleep := w.persisted[info.ID]
	created, ok := mapping.ParseVendorTime(info.CreatedAt)
	if w.startAtEnd && !known && !asleep && ok && created.UnixNano() <= w.startedAt {
		w.fromEnd[info.ID] = struct{}{}
	}
}

// take takes in what the server shows of one conversation of this shard,
// queueing it when it wants a socket. One queued already stays queued,
// as shown now, unless it is going: observe reports a move once.
func (w *serverWatch) take(ctx context.Context, info conversationInfo) {
	_, queued := w.waiting[info.ID]
	switch {
	case w.observe(ctx, info):
		w.waiting[info.ID] = info
	case info.ExecutionStatus == "deleting" || w.ended.Has(info.ID):
		delete(w.waiting, info.ID)
	case queued:
		w.waiting[info.ID] = info
	}
}

// skipItem reports a search item that cannot be taken in; the rest of its
// page is.
func (w *serverWatch) skipItem(ctx context.Context, item searchItem) {
	w.tel.searchItemSkipped(ctx, w.api.name, item.skip)
	w.rl.Warn("search-item:"+item.skip, "skipped a conversation search item; the others are observed",
		zap.String("reason", item.skip), zap.Error(item.err))
}

// recheckRequests bounds the requests of a recheck in flight at once.
const recheckRequests = 4

// recheck reads by id, maxBatchIDs a request, every conversation known
// (shown by the server, or only in storage) that a full listing did not
// show, recheckRequests requests at a time: one the server answers null
// for is gone, and its session ends; an answer is taken in as if listed;
// a failure changes nothing.
func (w *serverWatch) recheck(ctx context.Context, listed map[string]bool) {
	w.lastRecheck = time.Now()
	var unlisted []string
	for _, known := range []map[string]struct{}{w.onServer, w.persisted} {
		for id := range known {
			if !listed[id] {
				unlisted = append(unlisted, id)
			}
		}
	}
	slices.Sort(unlisted)
	chunks := slices.Collect(slices.Chunk(slices.Compact(unlisted), maxBatchIDs))
	answers := make([][]lookup, len(chunks))
	var g errgroup.Group
	g.SetLimit(recheckRequests)
	for i, ids := range chunks {
		g.Go(func() (err error) {
			answers[i], err = w.api.conversations(ctx, ids)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		w.rl.Warn("lookup", "cannot look up some of the conversations search did not list; they stay observed", zap.Error(err))
	}
	for c, ids := range chunks { // answers[c] is nil for a request that failed
		for i, a := range answers[c] {
			id := ids[i]
			switch {
			case a.err != nil:
				w.rl.Warn("lookup-item", "cannot read a conversation looked up by id; it stays observed",
					zap.String("conversation", id), zap.Error(a.err))
			case a.gone:
				delete(w.onServer, id)
				w.gone(ctx, id)
			default:
				w.noteChild(ctx, a.info)
				if w.shard.owns(id) {
					w.take(ctx, a.info)
				}
			}
		}
	}
}

// gone ends the session of a known conversation the server no longer has.
func (w *serverWatch) gone(ctx context.Context, id string) {
	if _, asleep := w.persisted[id]; asleep && w.wake(ctx, conversationInfo{ID: id}) == nil {
		if !w.ended.Has(id) {
			w.forget(ctx, id) // unreadable: no session to end
		}
		return
	}
	delete(w.waiting, id)
	delete(w.fromEnd, id)
	if c, known := w.convs[id]; known {
		w.endSession(ctx, c)
	}
}

// observe takes in what search shows of one conversation and reports
// whether it wants a socket: new, or detached and due to re-attach.
func (w *serverWatch) observe(ctx context.Context, info conversationInfo) (wantsSocket bool) {
	w.onServer[info.ID] = struct{}{}
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
// the waiting conversations most recently updated first; when they are
// short, attached conversations that sat idle or terminal for a poll
// interval give theirs up (preempt): idle history never starves new
// activity. A conversation first seen starts its session only when it
// gets a slot. The rest wait, reported as overflow.
func (w *serverWatch) attachWaiting(ctx context.Context) {
	queue := make([]conversationInfo, 0, len(w.waiting))
	for id, info := range w.waiting {
		if c, known := w.convs[id]; known && c.attached() {
			delete(w.waiting, id) // attached meanwhile, by a push
			continue
		}
		queue = append(queue, info)
	}
	slices.SortFunc(queue, func(a, b conversationInfo) int {
		return cmp.Or(cmp.Compare(updatedAt(b), updatedAt(a)), cmp.Compare(a.ID, b.ID))
	})
	free := w.freeSlots()
	if short := len(queue) - free; short > 0 {
		free += w.preempt(short)
	}
	for _, info := range queue[:min(len(queue), max(free, 0))] {
		delete(w.waiting, info.ID)
		w.attachOne(ctx, info)
	}
	w.reportOverflow(ctx, len(w.waiting))
}

// preempt detaches up to n attached conversations releasable for a poll
// interval, the longest quiet first, and returns how many it detached. Their events were all seen; like one
// idle_detach detached, each attaches again once search shows it move.
func (w *serverWatch) preempt(n int) int {
	type quiet struct {
		c     *conversation
		since time.Time
	}
	var idle []quiet
	for _, c := range w.convs {
		if since, ok := c.releasable(w.pollInterval); ok {
			idle = append(idle, quiet{c, since})
		}
	}
	slices.SortFunc(idle, func(a, b quiet) int { return a.since.Compare(b.since) })
	idle = idle[:min(n, len(idle))]
	for _, q := range idle {
		q.c.detach()
		q.c.exit = errIdleDetached
	}
	return len(idle)
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
	t, ok := mapping.ParseVendorTime(info.UpdatedAt)
	if !ok {
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
	delete(w.waiting, c.id)
	w.index.remove(c.session)
	w.ended.add(c.id)
	if handedOn {
		w.forget(ctx, c.id)
	}
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
