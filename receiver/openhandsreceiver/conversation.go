package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

const (
	// resumeMargin widens a reconnect's history window: the server stamps
	// events at creation but publishes and persists them asynchronously, so
	// an event a little older than the newest one seen may still be unseen.
	// The overlap window (overlapIDs) absorbs the overlap.
	resumeMargin = 5 * time.Second
	// firstFrameWait bounds the wait for a legacy connection's first frame,
	// the connect-time snapshot whose timestamp dates the subscription.
	firstFrameWait = 2 * time.Second
	// stableConnection is how long a connection must last to count as
	// healthy (resetting the reconnect backoff) without delivering a new
	// stored event.
	stableConnection = time.Minute
	// legacyFrameBuffer bounds the frames read ahead while the legacy
	// socket's history is paged; past it the reader blocks and TCP pushes
	// back on the server. The session socket pages nothing and reads no
	// frame ahead (readSession).
	legacyFrameBuffer = 256
	// maxKeptFrameBuffer bounds the frame buffer a session socket keeps
	// between frames: a rare large frame does not pin its size.
	maxKeptFrameBuffer = 64 << 10
	// maxBatchEvents bounds the AEP events mapped ahead of one emission:
	// frames that are already waiting are mapped into one batch (one
	// ConsumeLogs, one write-ahead), a lone frame goes out at once.
	maxBatchEvents = 128
	// usageWait bounds how long a run.finished waits for the stats update
	// of its run's last LLM response (mapping.Decorator); the server
	// publishes it within milliseconds of the run's end.
	usageWait = 2 * time.Second
)

var (
	// errIdleDetached ends an attach on purpose: the conversation sat idle
	// or terminal for idle_detach, and an attached socket would pin it in
	// the server's memory.
	errIdleDetached = errors.New("detached an idle conversation")
	// errConversationGone is the server's 4004: the id is unknown to it.
	errConversationGone = errors.New("agent server does not know the conversation (close 4004)")
)

// conversation is one observed conversation as discovery sees it: the
// attach loop that feeds its session (session.go) from a socket, and what
// discovery knows of it. The discovery goroutine starts and stops the
// attach goroutine.
type conversation struct {
	id      string
	session *session
	*attachSettings
	// only orders, with webhook.only, discovery's backfills and the
	// webhook's pushed batches, under a lock of its own.
	only onlyState

	// Owned by the attach goroutine.
	connectSnapshotPending bool // the connection's first snapshot is still to come
	// socket is the attached socket, nil between attaches; discovery cuts
	// it when it falls behind search (noteSearch).
	socket atomic.Pointer[socketCut]

	// Owned by the discovery goroutine.
	info       conversationInfo // as search last showed it
	attachedAt time.Time        // when the attach goroutine last started
	cancel     context.CancelFunc
	done       chan struct{}
	exit       error // why the attach goroutine stopped; read after done
	// noteSearch's view: since when the socket has been behind search
	// (zero if it is not), the stored count at the previous poll, whether
	// search moved while the socket delivered nothing, and what search
	// showed when it last had the socket recycled.
	behindSince  time.Time
	polledStored uint64
	searchAhead  bool
	recycledFor  conversationInfo
}

// attachSettings is what the conversations of one agent server share.
type attachSettings struct {
	api        *serverClient
	tel        *telemetry
	logger     *zap.Logger
	rl         *ratelog.Logger
	reconnect  backoff.Config // the backoff between attaches
	idleDetach time.Duration  // 0: never detach an idle conversation
	// fatal reports a conversation the server refused for good.
	fatal func(error)
}

func newConversation(set *attachSettings, info conversationInfo, s *session) *conversation {
	return &conversation{id: info.ID, session: s, attachSettings: set, info: info}
}

// begin emits session.started on first sight.
func (c *conversation) begin(ctx context.Context) {
	c.session.begin(ctx, c.info.CreatedAt)
}

// end closes the session: the conversation left search or reached
// deleting. It reports whether the session.ended was handed on; its
// stored batch is left for the caller to remove with the conversation
// (serverWatch.forget).
func (c *conversation) end(ctx context.Context) (handedOn bool) {
	c.detach()
	return c.session.end(ctx)
}

// attached reports whether the attach goroutine is running.
func (c *conversation) attached() bool {
	if c.done == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// attach starts the attach goroutine.
func (c *conversation) attach(parent context.Context) {
	if c.attached() {
		return
	}
	ctx, cancel := context.WithCancel(parent)
	c.cancel, c.done, c.exit, c.attachedAt = cancel, make(chan struct{}), nil, time.Now()
	go func() {
		defer close(c.done)
		c.exit = c.run(ctx)
	}()
}

// detach stops the attach goroutine and waits for it.
func (c *conversation) detach() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
}

// run attaches and re-attaches with backoff until the context ends, the
// conversation idles out, or the server calls it fatal (4001, 4004). Only
// progress resets the backoff, so a server that accepts and at once closes,
// before or after `sync`, is retried exponentially less often.
func (c *conversation) run(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		progressed, err := c.attachOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errIdleDetached):
			c.logger.Debug("detached idle conversation", zap.String("conversation", c.id))
			return err
		case errors.Is(err, errAuthRejected), errors.Is(err, errConversationGone):
			c.rl.Error("fatal:"+c.id, "conversation socket refused; not retrying until discovery lists it again",
				zap.String("conversation", c.id), zap.Error(err))
			c.fatal(err)
			return err
		}
		if progressed {
			attempt = 0
		}
		if cause := stallCause(err); cause != "" {
			c.tel.stall(ctx, cause)
		}
		c.tel.reconnects.Add(ctx, 1)
		c.rl.Warn("socket:"+c.id, "conversation socket lost; reconnecting",
			zap.String("conversation", c.id), zap.Error(err))
		if err := c.reconnect.Sleep(ctx, attempt); err != nil {
			return err
		}
	}
}

type frame struct {
	data []byte
	err  error
}

// attachOnce runs one socket until it fails or detaches. On the session
// socket the server replays every durable event after the last seq seen,
// then goes live, with no interleaving by construction; a stored event too
// large for the socket is read over REST instead (passOversizeEvent). On
// the legacy socket the receiver dials live-only, pages the history over
// REST while the socket's frames buffer, then drains the buffer: history
// and live never interleave either, and the overlap window drops the
// overlap. Either way every event is processed once, in log order.
// progressed reports whether the connection got anywhere: a new stored
// event processed, or stableConnection of uptime.
func (c *conversation) attachOnce(ctx context.Context) (progressed bool, err error) {
	afterSeq, _ := c.session.resumeCursor()
	conn, fc, session, err := c.api.dialConversation(ctx, c.id, afterSeq, c.session.fromEnd())
	if err != nil {
		return false, err
	}
	c.tel.attached.Add(ctx, 1)
	defer c.tel.attached.Add(context.WithoutCancel(ctx), -1)
	start, storedBefore := time.Now(), c.session.storedCount()
	defer func() {
		progressed = progressed || c.session.storedCount() > storedBefore || time.Since(start) >= stableConnection
	}()

	cut := &socketCut{conn: conn}
	c.socket.Store(cut)
	stopWatch := c.watchSocket(ctx, cut)
	defer func() {
		c.socket.Store(nil)
		stopWatch()
		// No close frame: the auth frame stays the only data frame we write.
		conn.Close()
		c.session.detached(ctx)
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case cut.reason() != nil:
			err = cut.reason()
		}
	}()

	c.connectSnapshotPending = true
	if session {
		return c.readSession(ctx, conn, fc)
	}
	return false, c.readLegacy(ctx, conn)
}

// watchSocket pings the socket (keepAlive) and closes it, ending its
// read, when ctx ends or the conversation has sat idle or terminal for
// idle_detach (errIdleDetached), until stop.
func (c *conversation) watchSocket(ctx context.Context, cut *socketCut) (stop func()) {
	stopCtx := context.AfterFunc(ctx, func() { cut.conn.Close() })
	stopPing := keepAlive(cut.conn, c.api.sockets)
	stopIdle := func() {}
	if d := c.idleDetach; d > 0 {
		stopIdle = every(max(d/4, 10*time.Millisecond), func() bool {
			if !c.session.idleExpired(d) {
				return true
			}
			cut.close(errIdleDetached)
			return false
		})
	}
	return func() { stopCtx(); stopPing(); stopIdle() }
}

// noteSearch compares what a discovery round shows of the conversation
// with what its socket delivered. The socket is behind when search shows
// a status it has not delivered, or a move (updated_at, execution_status)
// during a poll interval in which it delivered no stored event; one that
// stays behind, delivering nothing, for behindSearch is cut and redialled
// (its TCP alive, but its server side or a proxy no longer forwarding).
// Called by discovery, before info is updated.
func (c *conversation) noteSearch(info conversationInfo, now time.Time) {
	stored, status := c.session.progress()
	progressed := stored != c.polledStored
	c.polledStored = stored
	switch {
	case progressed:
		c.searchAhead = false
	case moved(c.info, info):
		c.searchAhead = true
	}
	behind := c.searchAhead || status != "" && info.ExecutionStatus != "" && info.ExecutionStatus != status
	switch {
	case !behind || progressed:
		c.behindSince = time.Time{}
		return
	case c.behindSince.IsZero():
		c.behindSince = now
		return
	case now.Sub(c.behindSince) < c.api.sockets.behindSearch, info == c.recycledFor:
		// Not yet; or this very view of search already had the socket
		// recycled (a status the server changed without telling sockets):
		// once per view, never in a loop.
		return
	}
	c.behindSince, c.searchAhead, c.recycledFor = time.Time{}, false, info
	if s := c.socket.Load(); s != nil {
		s.close(errBehindSearch)
	}
}

// releasable reports whether the attached conversation may give its
// socket up to one waiting, and since when it has been quiet: idle or
// terminal with no event for d since its socket delivered one (its
// connect snapshot at least: the server sends it once the history is
// replayed), and not behind what search last showed (as noteSearch
// judges). Discovery attaches it again once search shows it move. Called
// by discovery.
func (c *conversation) releasable(d time.Duration) (quietSince time.Time, ok bool) {
	quietSince, idle := c.session.quietSince()
	stored, status := c.session.progress()
	behind := c.searchAhead && stored == c.polledStored || c.info.ExecutionStatus != "" && c.info.ExecutionStatus != status
	delivered := quietSince.After(c.attachedAt)
	return quietSince, c.attached() && idle && delivered && !behind && time.Since(quietSince) >= d
}

// every calls f every period, each time on a timer's goroutine, until f
// returns false or stop is called: a watch that holds no goroutine while
// it waits.
func every(period time.Duration, f func() bool) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(period, func() {
		if !f() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(period)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// readSession reads /sockets/session frames on this goroutine, with no
// goroutine reading ahead: each frame is mapped as it is read, and what is
// mapped is emitted unless a whole next frame has already been received
// (fc), which then joins the batch.
func (c *conversation) readSession(ctx context.Context, conn *websocket.Conn, fc *frameConn) (progressed bool, err error) {
	reader := newFrameReader(conn, c.api.maxFrame, c.api.sockets)
	var buf []byte // every frame is read into it: decoding copies out what it keeps
	for {
		data, err := reader.read(buf)
		if cap(data) <= maxKeptFrameBuffer {
			buf = data
		}
		switch {
		case errors.Is(err, errFrameTooLarge):
			return c.passOversizeEvent(ctx, err)
		case err != nil:
			return false, err
		}
		c.receive(ctx, c.handleSessionFrame, data, fc.wholeFrameWaiting())
	}
}

// readLegacy reads /sockets/events frames through a read-ahead buffer,
// which holds the live frames while attachLegacy pages the history.
func (c *conversation) readLegacy(ctx context.Context, conn *websocket.Conn) error {
	frames := make(chan frame, legacyFrameBuffer)
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() { readFrames(newFrameReader(conn, c.api.maxFrame, c.api.sockets), frames, stop) })
	defer func() {
		close(stop)
		conn.Close()
		reader.Wait()
	}()
	if err := c.attachLegacy(ctx, frames); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case f := <-frames:
			if f.err != nil {
				return f.err
			}
			c.receive(ctx, c.handleLegacyFrame, f.data, len(frames) > 0)
		}
	}
}

// receive handles one frame and, unless another one is waiting to join
// its batch, emits what is mapped.
func (c *conversation) receive(ctx context.Context, handle func(context.Context, []byte), data []byte, another bool) {
	c.api.sawFrame(len(data))
	handle(ctx, data)
	c.session.frameDone(ctx, another)
}

// attachLegacy pages the history of a fresh legacy connection and then
// handles its first frame, normally the connect-time snapshot: that frame
// dates the subscription, so the overlap window holds only the ids the
// buffered live frames can repeat.
func (c *conversation) attachLegacy(ctx context.Context, frames <-chan frame) error {
	var first *frame
	wait := time.NewTimer(firstFrameWait)
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case f := <-frames:
		if f.err != nil {
			return f.err
		}
		first = &f
	case <-wait.C: // hold every id until the history is drained
	}
	subscribed := ""
	if first != nil {
		if ev, err := mapping.DecodeEvent(first.data); err == nil {
			subscribed = ev.Timestamp()
		}
	}
	c.session.holdOverlap(subscribed)
	if c.session.fromEnd() {
		c.session.skipHistory(-1, subscribed) // start_at: end
	} else if err := c.replayHistory(ctx); err != nil {
		return fmt.Errorf("page history: %w", err)
	}
	c.session.overlapHistoryDone()
	if first != nil {
		c.handleLegacyFrame(ctx, first.data)
		c.session.flush(ctx)
	}
	return nil
}

// errFrameTooLarge marks a frame over max_frame_bytes, or the server's own
// frame cap (close 1013 "frame_too_large").
var errFrameTooLarge = errors.New("socket frame too large")

// readFrames forwards text frames until the socket fails or stop closes.
func readFrames(r *frameReader, out chan<- frame, stop <-chan struct{}) {
	for {
		data, err := r.read(nil)
		select {
		case out <- frame{data: data, err: err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// classifyClose turns the server's meaningful close codes into sentinel
// errors.
func classifyClose(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch {
		case ce.Code == 4001:
			return fmt.Errorf("socket closed %d %q: %w", ce.Code, ce.Text, errAuthRejected)
		case ce.Code == 4004:
			return fmt.Errorf("socket closed %d %q: %w", ce.Code, ce.Text, errConversationGone)
		case ce.Code == websocket.CloseTryAgainLater && ce.Text == "frame_too_large":
			return fmt.Errorf("socket closed %d %q: %w", ce.Code, ce.Text, errFrameTooLarge)
		}
	}
	return err
}

// passOversizeEvent gets a session past a stored event its socket cannot
// carry: every reconnect would resume at the same after_seq and fail on the
// same frame. The stored events after the cursor are read over REST
// instead, one at a time and each bounded by max_frame_bytes, and processed
// like their durable frames; one larger than that becomes a visible
// x.openhands.event.oversize naming its id and size. Frames the server had
// queued are lost with the connection, so small events may come first: it
// reads on until an event larger than any frame the server has delivered
// (the likely culprit), at most a replay page. When no stored event follows
// the cursor the oversize frame was transient and there is nothing to
// skip: the reconnect backs off.
func (c *conversation) passOversizeEvent(ctx context.Context, cause error) (progressed bool, err error) {
	largest := c.api.largestFrame.Load()
	for n := 0; n < maxCatchUp; n++ {
		seq, id := c.session.resumeCursor()
		next, err := c.api.storedEventAfter(ctx, c.id, seq, id, c.api.maxFrame)
		switch {
		case err != nil:
			return n > 0, fmt.Errorf("%w; reading the stored event after seq %d over REST: %w", cause, seq, err)
		case next == nil && n == 0:
			return false, fmt.Errorf("%w; no stored event follows seq %d, so the frame was not one", cause, seq)
		case next == nil:
			return true, fmt.Errorf("%w; read the rest of the log over REST", cause)
		}
		c.catchUp(ctx, seq+1, next)
		if next.raw == nil || next.size+durableEnvelope > largest {
			break
		}
	}
	seq, _ := c.session.resumeCursor()
	return true, fmt.Errorf("%w; read past it over REST, resuming after seq %d", cause, seq)
}

const (
	// maxCatchUp bounds the events one oversize frame reads over REST: the
	// server replays in pages of 100.
	maxCatchUp = 100
	// durableEnvelope is the bytes a durable frame adds around its event.
	durableEnvelope = int64(len(`{"type":"durable","seq":,"event":}`) + 20)
)

// catchUp processes one stored event read over REST, at seq, as its
// durable frame would have been, or in its place, when too large to hold,
// the x.openhands.event.oversize that names it.
func (c *conversation) catchUp(ctx context.Context, seq int64, ev *storedEvent) {
	fields := []zap.Field{
		zap.String("conversation", c.id), zap.Int64("seq", seq),
		zap.String("vendor_event_id", ev.id), zap.Int64("size_bytes", ev.size),
	}
	if ev.raw != nil {
		c.tel.restCatchUp(ctx, "mapped")
		c.rl.Warn("oversize:"+c.id, "the session socket failed on an oversize frame; reading stored events over REST", fields...)
		event, err := mapping.DecodeEvent(ev.raw)
		c.session.handleDurable(ctx, seq, len(ev.raw), event, err)
		return
	}
	c.tel.restCatchUp(ctx, "degraded")
	c.rl.Warn("oversize:"+c.id, "a stored event is larger than max_frame_bytes; emitting x.openhands.event.oversize in its place",
		append(fields, zap.Int64("max_frame_bytes", c.api.maxFrame))...)
	c.session.oversize(seq, mapping.Oversize{ID: ev.id, Kind: ev.kind, Timestamp: ev.timestamp, Size: ev.size, Limit: c.api.maxFrame})
}

// replayHistory pages the persisted log: all of it on first attach, else
// from a margin before the newest vendor timestamp seen.
func (c *conversation) replayHistory(ctx context.Context) error {
	since := resumeFrom(c.session.resumeTS())
	defer c.session.flush(ctx)
	return c.api.searchEvents(ctx, c.id, since, func(raw json.RawMessage) error {
		c.handleEvent(ctx, raw, legacyHistory, false)
		return ctx.Err()
	})
}

// predates reports whether vendor timestamp ts is strictly older than
// newest; unreadable timestamps predate nothing.
func predates(ts, newest string) bool {
	t, ok1 := mapping.ParseVendorTime(ts)
	n, ok2 := mapping.ParseVendorTime(newest)
	return ok1 && ok2 && t.Before(n)
}

// resumeFrom is the timestamp__gte of a reconnect's history page.
func resumeFrom(ts string) string {
	if ts == "" {
		return ""
	}
	t, ok := mapping.ParseVendorTime(ts)
	if !ok {
		return ts
	}
	return t.Add(-resumeMargin).Format("2006-01-02T15:04:05.000000")
}

// handleLegacyFrame processes one frame of the legacy socket: an event.
func (c *conversation) handleLegacyFrame(ctx context.Context, raw []byte) {
	c.handleEvent(ctx, raw, legacyLive, c.takeConnectSnapshot())
}

// takeConnectSnapshot reports whether an event is this connection's first
// live (legacy) or transient (session) one: normally the full_state
// snapshot the server takes when the socket subscribes, before the history
// replayed next, so it may be older than that history and must not move
// the execution status backwards (mapping.MapConnectSnapshot).
func (c *conversation) takeConnectSnapshot() bool {
	if !c.connectSnapshotPending {
		return false
	}
	c.connectSnapshotPending = false
	return true
}

// handleSessionFrame processes one /sockets/session envelope: durable
// events advance the seq cursor a reconnect resumes from (after_seq),
// transient ones do not; text deltas feed the streaming-delta mapping.
func (c *conversation) handleSessionFrame(ctx context.Context, raw []byte) {
	f, err := decodeSessionFrame(raw)
	switch {
	case err != nil:
		c.session.undecodable(ctx, mapping.UndecodableFrame, len(raw), err)
		return
	case f.Type == "durable" && (!f.HasSeq || f.Event == nil):
		c.session.undecodable(ctx, mapping.UndecodableFrame, len(raw), errors.New("a durable frame without seq or event"))
		return
	}
	switch f.Type {
	case "sync":
		through := int64(-1) // an empty log
		if f.ThroughSeq != nil {
			through = *f.ThroughSeq
		}
		c.session.skipHistory(through, "") // start_at: end
	case "durable":
		ev, err := mapping.EventOf(f.Event)
		c.session.handleDurable(ctx, f.Seq, len(raw), ev, err)
	case "transient":
		if ev, err := mapping.EventOf(f.Event); c.decoded(ctx, ev, err, len(raw)) {
			c.session.process(ctx, ev, transientFrame, c.takeConnectSnapshot())
		}
	case "delta":
		if f.Kind != "" && f.Kind != "text" {
			return // reasoning never rides: no schema field may hold it
		}
		if ev, err := mapping.EventOf(streamingDelta(f)); c.decoded(ctx, ev, err, len(raw)) {
			c.session.process(ctx, ev, transientFrame, false)
		}
	case "error":
		c.rl.Warn("server-error:"+c.id, "the agent server reported a socket error",
			zap.String("conversation", c.id), zap.String("code", f.Code), zap.String("detail", f.Detail))
	}
}

// streamingDelta turns a session-socket delta frame into the
// StreamingDeltaEvent the legacy socket would have carried, so one mapping
// (and one streaming redactor) serves both. Its id is unique per (item,
// attempt, order); the durable event retiring the item ends the stream.
func streamingDelta(f sessionFrame) map[string]any {
	return map[string]any{
		"kind":    "StreamingDeltaEvent",
		"id":      fmt.Sprintf("%s/%d/%d", f.ItemID, max(f.Attempt, 1), f.Order),
		"source":  "agent",
		"content": f.Content,
	}
}

// handleEvent processes one legacy-socket (legacyLive) or REST-history
// (legacyHistory) event.
func (c *conversation) handleEvent(ctx context.Context, raw []byte, how delivery, connectSnapshot bool) {
	if ev, err := mapping.DecodeEvent(raw); c.decoded(ctx, ev, err, len(raw)) {
		c.session.process(ctx, ev, how, connectSnapshot)
	}
}

// decoded counts a decoded event, or puts a visible stand-in in place of
// one of size bytes that failed to decode, and reports which.
func (c *conversation) decoded(ctx context.Context, ev mapping.Event, err error, size int) bool {
	if err != nil {
		c.session.undecodable(ctx, mapping.UndecodableEvent, size, err)
		return false
	}
	c.session.count(ctx, ev)
	return true
}
