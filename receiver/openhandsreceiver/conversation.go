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
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
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
	// vendorTimeLayout is the server's naive isoformat() with microseconds.
	vendorTimeLayout = "2006-01-02T15:04:05.999999"
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

// conversation is one observed conversation: one AEP session. The
// discovery goroutine starts and stops its attach goroutine; mu serializes
// everything that maps and emits, so seq order is emission order. What of
// it survives a restart is its durableState (state.go).
type conversation struct {
	id      string
	watch   *serverWatch
	journal *journal // nil without storage

	mu     sync.Mutex
	mapper *mapping.Conversation
	notes  *openhandscontrol.Notes // the control gate's state; nil without one
	// decorator adds what the pinned field maps leave out (cause, durations,
	// usage, traceparent) to everything the mapper emits.
	decorator  *mapping.Decorator
	emitter    *sessionEmitter
	overlap    *overlapIDs  // the ids a resume or an attach's buffer can repeat
	vendorIDs  *vendorIDs   // the last stored events processed: lineage, and the webhook's dedupe
	metadata   metaShown    // title, tags as the webhook last showed them
	only       onlyState    // webhook.only: backfills and pushed batches in order
	resumeTS   string       // newest vendor timestamp of a persisted event seen
	durableSeq int64        // last /sockets/session seq processed; -1 before any
	durableID  string       // its vendor event id, the REST anchor of the next one
	lastSeen   time.Time    // when the last vendor event arrived
	stored     uint64       // new stored events processed, the measure of progress
	mapped     []*aep.Event // mapped, not yet emitted (flushLocked)
	consumed   bool         // the pipeline took the stored pending batch; markDoneLocked is to delete it
	usageWait  *time.Timer  // armed while a run.finished waits for its usage
	usageWaits uint64       // usage waits armed or disarmed, to tell a stale one

	// Owned by the attach goroutine.
	connectSnapshotPending bool // the connection's first snapshot is still to come
	// socket is the attached socket, nil between attaches; discovery cuts
	// it when it falls behind search (noteSearch).
	socket atomic.Pointer[socketCut]

	// Owned by the discovery goroutine.
	info   conversationInfo // as search last showed it
	cancel context.CancelFunc
	done   chan struct{}
	exit   error // why the attach goroutine stopped; read after done
	// noteSearch's view: since when the socket has been behind search
	// (zero if it is not), the stored count at the previous poll, whether
	// search moved while the socket delivered nothing, and what search
	// showed when it last had the socket recycled.
	behindSince  time.Time
	polledStored uint64
	searchAhead  bool
	recycledFor  conversationInfo
}

// begin emits session.started on first sight.
func (c *conversation) begin(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	created, err := time.Parse(time.RFC3339Nano, c.info.CreatedAt)
	if err != nil {
		created = time.Now()
	}
	if start := c.mapper.Start(created, time.Now()); start != nil {
		c.mapped = append(c.mapped, start)
	}
	c.flushLocked(ctx)
}

// end closes the session: the conversation left search or reached
// deleting. It reports whether the session.ended was handed on; its
// stored batch is left for the caller to remove with the conversation
// (serverWatch.forget).
func (c *conversation) end(ctx context.Context) (handedOn bool) {
	c.detach()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.mapper.End(time.Now(), c.resumeTS) // nil once ended
	c.mapped = append(c.mapped, c.decorator.DecorateEnd(c.resumeTS, out)...)
	return c.flushLocked(ctx)
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
	c.cancel, c.done, c.exit = cancel, make(chan struct{}), nil
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
	w := c.watch
	for attempt := 0; ; attempt++ {
		progressed, err := c.attachOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errIdleDetached):
			w.logger.Debug("detached idle conversation", zap.String("conversation", c.id))
			return err
		case errors.Is(err, errAuthRejected), errors.Is(err, errConversationGone):
			w.rl.Error("fatal:"+c.id, "conversation socket refused; not retrying until discovery lists it again",
				zap.String("conversation", c.id), zap.Error(err))
			w.reportConversationFatal(err)
			return err
		}
		if progressed {
			attempt = 0
		}
		if cause := stallCause(err); cause != "" {
			w.tel.stall(ctx, cause)
		}
		w.tel.reconnects.Add(ctx, 1)
		w.rl.Warn("socket:"+c.id, "conversation socket lost; reconnecting",
			zap.String("conversation", c.id), zap.Error(err))
		if err := w.reconnect.Sleep(ctx, attempt); err != nil {
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
	w := c.watch
	c.mu.Lock()
	afterSeq := c.durableSeq
	c.mu.Unlock()
	conn, fc, session, err := w.api.dialConversation(ctx, c.id, afterSeq)
	if err != nil {
		return false, err
	}
	w.tel.attached.Add(ctx, 1)
	defer w.tel.attached.Add(context.WithoutCancel(ctx), -1)
	start, storedBefore := time.Now(), c.storedCount()
	defer func() {
		progressed = progressed || c.storedCount() > storedBefore || time.Since(start) >= stableConnection
	}()

	cut := &socketCut{conn: conn}
	c.socket.Store(cut)
	stopWatch := c.watchSocket(ctx, cut)
	defer func() {
		c.socket.Store(nil)
		stopWatch()
		// No close frame: the auth frame stays the only data frame we write.
		conn.Close()
		c.mu.Lock()
		c.stopUsageWaitLocked()
		c.flushLocked(ctx)
		c.markDoneLocked(ctx)
		c.mu.Unlock()
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
	stopPing := keepAlive(cut.conn, c.watch.api.sockets)
	stopIdle := func() {}
	if d := c.watch.idleDetach; d > 0 {
		stopIdle = every(max(d/4, 10*time.Millisecond), func() bool {
			if !c.idleExpired(d) {
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
	c.mu.Lock()
	stored, status := c.stored, c.mapper.Status()
	c.mu.Unlock()
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
	case now.Sub(c.behindSince) < c.watch.api.sockets.behindSearch, info == c.recycledFor:
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
	reader := newFrameReader(conn, c.watch.api.maxFrame, c.watch.api.sockets)
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
	reader.Go(func() { readFrames(newFrameReader(conn, c.watch.api.maxFrame, c.watch.api.sockets), frames, stop) })
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
	c.watch.api.sawFrame(len(data))
	handle(ctx, data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !another {
		c.flushLocked(ctx) // nothing more waiting: emit what is mapped
	}
	c.syncUsageWaitLocked(ctx)
}

// syncUsageWaitLocked arms the wait of a run.finished the decorator holds
// for its usage, keeps an armed one, or disarms it once nothing is held.
func (c *conversation) syncUsageWaitLocked(ctx context.Context) {
	switch {
	case !c.decorator.Holding():
		c.stopUsageWaitLocked()
	case c.usageWait == nil:
		c.usageWaits++
		armed := c.usageWaits
		c.usageWait = time.AfterFunc(usageWait, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.usageWaits == armed { // not disarmed meanwhile
				c.releaseHeldLocked(ctx)
			}
		})
	}
}

func (c *conversation) stopUsageWaitLocked() {
	if c.usageWait != nil {
		c.usageWait.Stop()
		c.usageWait = nil
		c.usageWaits++
	}
}

// releaseHeldLocked emits a run.finished that waited usageWait for its
// usage.
func (c *conversation) releaseHeldLocked(ctx context.Context) {
	c.usageWait = nil
	c.mapped = append(c.mapped, c.decorator.Release()...)
	c.flushLocked(ctx)
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
	c.mu.Lock()
	c.overlap.hold(subscribed)
	c.mu.Unlock()
	if err := c.replayHistory(ctx); err != nil {
		return fmt.Errorf("page history: %w", err)
	}
	c.mu.Lock()
	c.overlap.historyDone()
	c.mu.Unlock()
	if first != nil {
		c.handleLegacyFrame(ctx, first.data)
		c.flush(ctx)
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
	w := c.watch
	largest := w.api.largestFrame.Load()
	for n := 0; n < maxCatchUp; n++ {
		next, err := w.api.storedEventAfter(ctx, c.id, c.durableSeq, c.durableID, w.api.maxFrame)
		switch {
		case err != nil:
			return n > 0, fmt.Errorf("%w; reading the stored event after seq %d over REST: %w", cause, c.durableSeq, err)
		case next == nil && n == 0:
			return false, fmt.Errorf("%w; no stored event follows seq %d, so the frame was not one", cause, c.durableSeq)
		case next == nil:
			return true, fmt.Errorf("%w; read the rest of the log over REST", cause)
		}
		c.catchUp(ctx, next)
		if next.raw == nil || next.size+durableEnvelope > largest {
			break
		}
	}
	return true, fmt.Errorf("%w; read past it over REST, resuming after seq %d", cause, c.durableSeq)
}

const (
	// maxCatchUp bounds the events one oversize frame reads over REST: the
	// server replays in pages of 100.
	maxCatchUp = 100
	// durableEnvelope is the bytes a durable frame adds around its event.
	durableEnvelope = int64(len(`{"type":"durable","seq":,"event":}`) + 20)
)

// catchUp processes one stored event read over REST as its durable frame
// would have been, or in its place, when too large to hold, the
// x.openhands.event.oversize that names it.
func (c *conversation) catchUp(ctx context.Context, ev *storedEvent) {
	w := c.watch
	seq := c.durableSeq + 1
	fields := []zap.Field{
		zap.String("conversation", c.id), zap.Int64("seq", seq),
		zap.String("vendor_event_id", ev.id), zap.Int64("size_bytes", ev.size),
	}
	if ev.raw != nil {
		w.tel.restCatchUp(ctx, "mapped")
		w.rl.Warn("oversize:"+c.id, "the session socket failed on an oversize frame; reading stored events over REST", fields...)
		event, err := mapping.DecodeEvent(ev.raw)
		c.handleDurable(ctx, seq, len(ev.raw), event, err)
		return
	}
	w.tel.restCatchUp(ctx, "degraded")
	w.rl.Warn("oversize:"+c.id, "a stored event is larger than max_frame_bytes; emitting x.openhands.event.oversize in its place",
		append(fields, zap.Int64("max_frame_bytes", w.api.maxFrame))...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.durableSeq, c.durableID = seq, ev.id
	c.lastSeen = time.Now()
	c.noteStoredLocked(ev.timestamp)
	placeholder := mapping.Oversize{ID: ev.id, Kind: ev.kind, Timestamp: ev.timestamp, Size: ev.size, Limit: w.api.maxFrame}
	c.mapped = append(c.mapped, c.decorator.Decorate(placeholder.Event(), c.mapper.Oversize(placeholder, time.Now()))...)
}

// replayHistory pages the persisted log: all of it on first attach, else
// from a margin before the newest vendor timestamp seen.
func (c *conversation) replayHistory(ctx context.Context) error {
	c.mu.Lock()
	since := resumeFrom(c.resumeTS)
	c.mu.Unlock()
	defer c.flush(ctx)
	return c.watch.api.searchEvents(ctx, c.id, since, func(raw json.RawMessage) error {
		c.handleEvent(ctx, raw, true, false)
		return ctx.Err()
	})
}

// predates reports whether vendor timestamp ts is strictly older than
// newest; unreadable timestamps predate nothing.
func predates(ts, newest string) bool {
	t, err1 := time.Parse(vendorTimeLayout, ts)
	n, err2 := time.Parse(vendorTimeLayout, newest)
	return err1 == nil && err2 == nil && t.Before(n)
}

// resumeFrom is the timestamp__gte of a reconnect's history page.
func resumeFrom(ts string) string {
	if ts == "" {
		return ""
	}
	t, err := time.Parse(vendorTimeLayout, ts)
	if err != nil {
		return ts
	}
	return t.Add(-resumeMargin).Format("2006-01-02T15:04:05.000000")
}

// handleLegacyFrame processes one frame of the legacy socket: an event.
func (c *conversation) handleLegacyFrame(ctx context.Context, raw []byte) {
	c.handleEvent(ctx, raw, false, c.takeConnectSnapshot())
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
	w := c.watch
	f, err := decodeSessionFrame(raw)
	switch {
	case err != nil:
		c.undecodable(ctx, mapping.UndecodableFrame, len(raw), err)
		return
	case f.Type == "durable" && (f.Seq == nil || f.Event == nil):
		c.undecodable(ctx, mapping.UndecodableFrame, len(raw), errors.New("a durable frame without seq or event"))
		return
	}
	switch f.Type {
	case "durable":
		ev, err := mapping.EventOf(f.Event)
		c.handleDurable(ctx, *f.Seq, len(raw), ev, err)
	case "transient":
		if ev, err := mapping.EventOf(f.Event); c.decoded(ctx, ev, err, len(raw)) {
			c.process(ctx, ev, transientFrame, c.takeConnectSnapshot())
		}
	case "delta":
		if f.Kind != "" && f.Kind != "text" {
			return // reasoning never rides: no schema field may hold it
		}
		if ev, err := mapping.EventOf(streamingDelta(f)); c.decoded(ctx, ev, err, len(raw)) {
			c.process(ctx, ev, transientFrame, false)
		}
	case "error":
		w.rl.Warn("server-error:"+c.id, "the agent server reported a socket error",
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

// handleDurable processes one stored event of the session socket at seq,
// size bytes, decoded or not (err). The seq cursor alone orders and
// dedupes stored events: a seq at or below it is a redelivery.
func (c *conversation) handleDurable(ctx context.Context, seq int64, size int, ev mapping.Event, err error) {
	if err == nil {
		c.count(ctx, ev) // duplicates included
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq <= c.durableSeq {
		c.watch.tel.duplicates.Add(ctx, 1)
		return
	}
	c.durableSeq, c.durableID = seq, ev.ID()
	if err != nil {
		c.undecodableLocked(ctx, mapping.UndecodableEvent, size, err)
		return
	}
	c.processLocked(ctx, ev, durableFrame, false)
}

// handleEvent processes one legacy-socket or REST-history event.
func (c *conversation) handleEvent(ctx context.Context, raw []byte, persisted, connectSnapshot bool) {
	how := legacyLive
	if persisted {
		how = legacyHistory
	}
	if ev, err := mapping.DecodeEvent(raw); c.decoded(ctx, ev, err, len(raw)) {
		c.process(ctx, ev, how, connectSnapshot)
	}
}

// decoded counts a decoded event, or puts a visible stand-in in place of
// one of size bytes that failed to decode, and reports which.
func (c *conversation) decoded(ctx context.Context, ev mapping.Event, err error, size int) bool {
	if err != nil {
		c.undecodable(ctx, mapping.UndecodableEvent, size, err)
		return false
	}
	c.count(ctx, ev)
	return true
}

// count counts a decoded vendor event, and the numbers in it that ride as
// text because no float64 holds them.
func (c *conversation) count(ctx context.Context, ev mapping.Event) {
	w := c.watch
	w.tel.vendorEvent(ev.Kind())
	if n := ev.NumbersAsText(); n > 0 {
		w.tel.numbersAsText.Add(ctx, int64(n))
		w.rl.Warn("numbers:"+c.id, "an agent-server event has numbers beyond float64 range; they ride as strings of their digits",
			zap.String("conversation", c.id), zap.String("vendor_event_id", ev.ID()), zap.Int("numbers", n))
	}
}

func (c *conversation) undecodable(ctx context.Context, reason string, size int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.undecodableLocked(ctx, reason, size, err)
}

// undecodableLocked puts x.openhands.frame.undecodable, naming the size and
// the reason, never the content, in place of a frame or event of size bytes
// that cannot be decoded (reason: mapping.UndecodableFrame or
// UndecodableEvent), before anything is sequenced: the session shows the
// gap, and seq has none.
func (c *conversation) undecodableLocked(ctx context.Context, reason string, size int, err error) {
	w := c.watch
	w.tel.decodeError(ctx, reason)
	w.rl.Error("decode:"+c.id, "cannot decode agent-server input; emitting x.openhands.frame.undecodable in its place",
		zap.String("conversation", c.id), zap.String("reason", reason), zap.Int("size_bytes", size), zap.Error(err))
	out := c.mapper.Undecodable(mapping.Undecodable{Size: int64(size), Reason: reason}, time.Now())
	c.mapped = append(c.mapped, c.decorator.Decorate(mapping.Event{}, out)...)
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
func (c *conversation) isRepeatLocked(ev mapping.Event, how delivery) bool {
	switch {
	case how == durableFrame:
		return c.overlap.retire(ev.ID())
	case how == webhookPush:
		return false // checked against either channel by pushedBeforeLocked
	case ev.Transient():
		return false // snapshots, deltas, socket errors: never stored, never repeated
	default:
		return !c.overlap.add(ev.ID(), ev.Timestamp())
	}
}

// noteStoredLocked records that a new stored event, stamped ts, was
// processed: the resume point and the measure of progress move.
func (c *conversation) noteStoredLocked(ts string) {
	c.resumeTS = max(c.resumeTS, ts)
	c.stored++
}

func (c *conversation) storedCount() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stored
}

func (c *conversation) process(ctx context.Context, ev mapping.Event, how delivery, connectSnapshot bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.processLocked(ctx, ev, how, connectSnapshot)
}

// processLocked dedupes, maps and batches one decoded event.
func (c *conversation) processLocked(ctx context.Context, ev mapping.Event, how delivery, connectSnapshot bool) {
	w := c.watch
	if c.mapper.Ended() {
		return
	}
	if c.isRepeatLocked(ev, how) || c.pushedBeforeLocked(ev, how) {
		w.tel.duplicates.Add(ctx, 1)
		return
	}
	now := time.Now()
	c.lastSeen = now
	// A pushed event is not the socket's progress, nor its resume point,
	// unless there is no socket (webhook.only).
	if (how != webhookPush || w.pushOnly) && (how == durableFrame || how == legacyHistory || !ev.Transient()) {
		c.noteStoredLocked(ev.Timestamp())
	}
	prev := c.mapper.Status()
	var out []*aep.Event
	if connectSnapshot || ev.Transient() && predates(ev.Timestamp(), c.resumeTS) {
		// A snapshot older than a persisted event already mapped (one that
		// waited in the socket buffer while the legacy history was paged)
		// must not move the status back: it is mapped as stale.
		out = c.mapper.MapConnectSnapshot(ev, now)
	} else {
		out = c.mapper.Map(ev, now)
	}
	mapped := out
	out = c.notes.Decorate(prev, out, now)
	if text, ok := userText(ev); ok && c.notes != nil {
		out = c.notes.Said(text, out, now)
	}
	out = c.decorator.Decorate(ev, out)
	c.linkLocked(ev, mapped)
	w.tel.mapped(ctx, time.Since(now))
	c.mapped = append(c.mapped, out...)
	if len(c.mapped) >= maxBatchEvents {
		c.flushLocked(ctx)
	}
}

// flush emits what has been mapped and not yet emitted.
func (c *conversation) flush(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked(ctx)
}

// flushLocked reports whether what was mapped, if anything, was handed on.
func (c *conversation) flushLocked(ctx context.Context) bool {
	if len(c.mapped) == 0 {
		return true
	}
	events := c.mapped
	c.mapped = nil
	return c.emitLocked(ctx, events)
}

// emitLocked is the one place a conversation's events leave, in batches
// (flushLocked): every event mapped since the last one. With storage,
// the positioned batch is written ahead together with the state it leads
// to, handed to the pipeline, then marked done; a crash anywhere in
// between re-sends exactly those records on the next start (journal). It
// reports whether they were handed on.
func (c *conversation) emitLocked(ctx context.Context, events []*aep.Event) bool {
	logs := c.emitter.batch(events)
	if logs.LogRecordCount() == 0 {
		return true
	}
	if err := c.writeAheadLocked(ctx, logs); err != nil {
		c.watch.rl.Error("emit:"+c.id, "could not write AEP events ahead; they are not emitted",
			zap.String("conversation", c.id), zap.Error(err))
		return false
	}
	return c.consumeLocked(ctx, logs)
}

// consumeLocked hands a batch to the pipeline's consumer. A stored batch
// the pipeline took needs no write of its own: the next write-ahead
// replaces it, and markDoneLocked deletes the last one when the
// conversation detaches. Until then a crash sends it again, a legal
// redelivery; one storage write per batch instead of two is what that
// buys. It reports whether the pipeline took the batch.
func (c *conversation) consumeLocked(ctx context.Context, logs plog.Logs) bool {
	if err := c.emitter.consume(ctx, logs); err != nil {
		c.watch.rl.Error("emit:"+c.id, "could not emit AEP events", zap.String("conversation", c.id), zap.Error(err))
		return false
	}
	c.consumed = c.journal != nil
	return true
}

// markDoneLocked deletes the stored pending batch once the pipeline took
// it, so that an orderly restart sends nothing again.
func (c *conversation) markDoneLocked(ctx context.Context) {
	if !c.consumed {
		return
	}
	c.consumed = false
	if err := c.journal.done(ctx, c.id); err != nil {
		c.watch.tel.storageErrors.Add(ctx, 1)
		c.watch.rl.Warn("storage:"+c.id, "could not mark a batch done; a restart sends it again",
			zap.String("conversation", c.id), zap.Error(err))
	}
}

// writeAheadLocked persists logs with the state they lead to, retrying a
// failing storage with the reconnect backoff: records leave only once a
// crash can no longer make the receiver map their vendor events again.
func (c *conversation) writeAheadLocked(ctx context.Context, logs plog.Logs) error {
	if c.journal == nil {
		return nil
	}
	pending, err := encodeBatch(logs)
	if err != nil {
		return err
	}
	state := c.snapshotLocked()
	for attempt := 0; ; attempt++ {
		written, err := c.journal.writeAhead(ctx, c.id, state, pending)
		if err == nil {
			c.watch.tel.storageWritten.Add(ctx, int64(written))
			c.consumed = false // the stored batch is this one now
			return nil
		}
		c.watch.tel.storageErrors.Add(ctx, 1)
		c.watch.rl.Warn("storage:"+c.id, "storage refused a write-ahead; retrying", zap.String("conversation", c.id), zap.Error(err))
		if err := c.watch.reconnect.Sleep(ctx, attempt); err != nil {
			return fmt.Errorf("write-ahead: %w", err)
		}
	}
}

// idleExpired reports whether the conversation has sat idle or terminal,
// with no event, for at least d.
func (c *conversation) idleExpired(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return mapping.ClosesRuns(c.mapper.Status()) && time.Since(c.lastSeen) >= d
}
