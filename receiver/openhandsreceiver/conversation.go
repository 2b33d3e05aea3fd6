package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

const (
	// resumeMargin widens a reconnect's history window: the server stamps
	// events at creation but publishes and persists them asynchronously, so
	// an event a little older than the newest one seen may still be unseen.
	// The dedupe window absorbs the overlap.
	resumeMargin = 5 * time.Second
	// frameBuffer bounds the frames read ahead while history is paged;
	// past it the reader blocks and TCP pushes back on the server.
	frameBuffer = 256
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
	// decorator adds what the pinned field maps leave out (cause, durations,
	// usage, traceparent) to everything the mapper emits.
	decorator  *mapping.Decorator
	emitter    *sessionEmitter
	seen       *recentIDs
	recent     recentTimestamps // persisted ids with their vendor timestamps
	resumeTS   string           // newest vendor timestamp of a persisted event seen
	durableSeq int64            // last /sockets/session seq processed; -1 before any
	legacy     bool             // attached to /sockets/events, which resumes with an overlap
	lastSeen   time.Time        // when the last vendor event arrived
	mapped     []*aep.Event     // mapped, not yet emitted (flushLocked)
	taken      bool             // the stored pending batch left; not yet marked done

	// Owned by the attach goroutine.
	connectSnapshotPending bool // the connection's first snapshot is still to come

	// Owned by the discovery goroutine.
	info   conversationInfo // as search last showed it
	cancel context.CancelFunc
	done   chan struct{}
	exit   error // why the attach goroutine stopped; read after done
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

// end closes the session: the conversation left search or reached deleting.
func (c *conversation) end(ctx context.Context) {
	c.detach()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.mapper.End(time.Now(), c.resumeTS) // nil once ended
	c.mapped = append(c.mapped, c.decorator.DecorateEnd(c.resumeTS, out)...)
	c.flushLocked(ctx)
	c.markDoneLocked(ctx)
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
// conversation idles out, or the server calls it fatal (4001, 4004).
func (c *conversation) run(ctx context.Context) error {
	w := c.watch
	for attempt := 0; ; attempt++ {
		live, err := c.attachOnce(ctx)
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
		if live {
			attempt = 0
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
// then goes live, with no interleaving by construction. On the legacy
// socket the receiver dials live-only, pages the history over REST while
// the socket's frames buffer, then drains the buffer: history and live
// never interleave either, and the vendor-id window drops the overlap.
// Either way every event is processed once, in log order. live reports
// whether the socket delivered at least one frame, so that a server that
// accepts and at once closes (1013, too many subscribers) still backs off.
func (c *conversation) attachOnce(ctx context.Context) (live bool, err error) {
	w := c.watch
	c.mu.Lock()
	afterSeq := c.durableSeq
	c.mu.Unlock()
	conn, session, err := w.api.dialConversation(ctx, c.id, afterSeq)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.legacy = !session
	c.mu.Unlock()
	w.tel.attached.Add(ctx, 1)
	defer w.tel.attached.Add(context.WithoutCancel(ctx), -1)

	frames := make(chan frame, frameBuffer)
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() { readFrames(conn, frames, stop) })
	defer func() {
		close(stop)
		// No close frame: the auth frame stays the only frame we write.
		conn.Close()
		reader.Wait()
		c.mu.Lock()
		c.flushLocked(ctx)
		c.markDoneLocked(ctx)
		c.mu.Unlock()
	}()

	handle := c.handleLegacyFrame
	if session {
		handle = c.handleSessionFrame
	} else if err := c.replayHistory(ctx); err != nil {
		return false, fmt.Errorf("page history: %w", err)
	}

	var idle <-chan time.Time
	if w.idleDetach > 0 {
		t := time.NewTicker(max(w.idleDetach/4, 10*time.Millisecond))
		defer t.Stop()
		idle = t.C
	}
	c.connectSnapshotPending = true
	var usageDue <-chan time.Time // armed while a run.finished waits for its usage
	for {
		select {
		case <-ctx.Done():
			return live, ctx.Err()
		case f := <-frames:
			if f.err != nil {
				return live, f.err
			}
			live = true
			handle(ctx, f.data)
			if len(frames) == 0 {
				c.flush(ctx) // nothing more waiting: emit what is mapped
			}
			usageDue = c.usageTimer(usageDue)
		case <-usageDue:
			c.releaseHeld(ctx)
			usageDue = nil
		case <-idle:
			if c.idleExpired(w.idleDetach) {
				return live, errIdleDetached
			}
		}
	}
}

// usageTimer arms the wait of a held run.finished, keeps an armed one, or
// disarms it once nothing is held.
func (c *conversation) usageTimer(armed <-chan time.Time) <-chan time.Time {
	c.mu.Lock()
	holding := c.decorator.Holding()
	c.mu.Unlock()
	switch {
	case !holding:
		return nil
	case armed == nil:
		return time.After(usageWait)
	default:
		return armed
	}
}

// releaseHeld emits a run.finished that waited usageWait for its usage.
func (c *conversation) releaseHeld(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mapped = append(c.mapped, c.decorator.Release()...)
	c.flushLocked(ctx)
}

// readFrames forwards text frames until the socket fails or stop closes.
func readFrames(conn *websocket.Conn, out chan<- frame, stop <-chan struct{}) {
	for {
		kind, data, err := conn.ReadMessage()
		if err == nil && kind != websocket.TextMessage {
			continue // the server sends JSON text frames only
		}
		if err != nil {
			err = classifyClose(err)
		}
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

// classifyClose turns the server's fatal close codes into sentinel errors.
func classifyClose(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case 4001:
			return fmt.Errorf("socket closed %d %q: %w", ce.Code, ce.Text, errAuthRejected)
		case 4004:
			return fmt.Errorf("socket closed %d %q: %w", ce.Code, ce.Text, errConversationGone)
		}
	}
	return err
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

// sessionFrame is one /sockets/session envelope; unknown types and fields
// are ignored, as the protocol asks of clients.
type sessionFrame struct {
	Type string `json:"type"`
	Seq  *int64 `json:"seq"`
	// Event is decoded with the envelope, as aep.DecodeValue would.
	Event   any    `json:"event"`
	ItemID  string `json:"item_id"`
	Attempt int    `json:"attempt"`
	Order   int    `json:"order"`
	Kind    string `json:"kind"`
	Content string `json:"content"`
	Code    string `json:"code"`
	Detail  string `json:"detail"`
}

// handleSessionFrame processes one /sockets/session envelope: durable
// events advance the seq cursor a reconnect resumes from (after_seq),
// transient ones do not; text deltas feed the streaming-delta mapping.
func (c *conversation) handleSessionFrame(ctx context.Context, raw []byte) {
	w := c.watch
	var f sessionFrame
	if err := aep.DecodeInto(raw, &f); err != nil {
		w.tel.decodeError(ctx, "frame")
		w.rl.Error("decode:"+c.id, "skipping a session-socket frame that cannot be decoded",
			zap.String("conversation", c.id), zap.Error(err))
		return
	}
	switch f.Type {
	case "durable":
		if f.Seq == nil || f.Event == nil {
			w.tel.decodeError(ctx, "frame")
			w.rl.Error("decode:"+c.id, "skipping a durable frame without seq or event", zap.String("conversation", c.id))
			return
		}
		// The vendor-id window drops redeliveries; seq is only the cursor.
		c.mu.Lock()
		c.durableSeq = max(c.durableSeq, *f.Seq)
		c.mu.Unlock()
		ev, err := mapping.EventOf(f.Event)
		c.handleDecoded(ctx, ev, err, true, false)
	case "transient":
		ev, err := mapping.EventOf(f.Event)
		c.handleDecoded(ctx, ev, err, false, c.takeConnectSnapshot())
	case "delta":
		if f.Kind != "" && f.Kind != "text" {
			return // reasoning never rides: no schema field may hold it
		}
		ev, err := mapping.EventOf(streamingDelta(f))
		c.handleDecoded(ctx, ev, err, false, false)
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

// handleEvent decodes and handles one event of the legacy socket or of a
// history page.
func (c *conversation) handleEvent(ctx context.Context, raw []byte, persisted, connectSnapshot bool) {
	ev, err := mapping.DecodeEvent(raw)
	c.handleDecoded(ctx, ev, err, persisted, connectSnapshot)
}

// handleDecoded dedupes, maps and emits one decoded event; err is its
// decode failure, which skips it visibly.
func (c *conversation) handleDecoded(ctx context.Context, ev mapping.Event, err error, persisted, connectSnapshot bool) {
	w := c.watch
	if err != nil {
		w.tel.decodeError(ctx, "event")
		w.rl.Error("decode:"+c.id, "skipping an agent-server event that cannot be decoded",
			zap.String("conversation", c.id), zap.Error(err))
		return
	}
	w.tel.vendorEvent(ctx, ev.Kind())

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mapper.Ended() {
		return
	}
	if !c.seen.add(ev.ID()) {
		w.tel.duplicates.Add(ctx, 1)
		return
	}
	now := time.Now()
	c.lastSeen = now
	if persisted || !ev.Transient() {
		c.resumeTS = max(c.resumeTS, ev.Timestamp())
		if c.journal != nil && c.legacy {
			// Kept for the stored cursor, pruned at every write-ahead.
			c.recent.add(ev.ID(), ev.Timestamp())
		}
	}
	var out []*aep.Event
	if connectSnapshot || predates(ev.Timestamp(), c.resumeTS) && ev.Transient() {
		// A snapshot older than a persisted event already mapped (one that
		// waited in the socket buffer while the legacy history was paged)
		// must not move the status back: it is mapped as stale.
		out = c.mapper.MapConnectSnapshot(ev, now)
	} else {
		out = c.mapper.Map(ev, now)
	}
	out = c.decorator.Decorate(ev, out)
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

func (c *conversation) flushLocked(ctx context.Context) {
	if len(c.mapped) == 0 {
		return
	}
	events := c.mapped
	c.mapped = nil
	c.emitLocked(ctx, events)
}

// emitLocked is the one place a conversation's events leave, in batches
// (flushLocked): every event mapped since the last one. With storage,
// the positioned batch is written ahead together with the state it leads
// to, handed to the pipeline, then marked done; a crash anywhere in
// between re-sends exactly those records on the next start (journal).
func (c *conversation) emitLocked(ctx context.Context, events []*aep.Event) {
	logs := c.emitter.batch(ctx, events)
	if logs.LogRecordCount() == 0 {
		return
	}
	if err := c.writeAheadLocked(ctx, logs); err != nil {
		c.watch.rl.Error("emit:"+c.id, "could not write AEP events ahead; they are not emitted",
			zap.String("conversation", c.id), zap.Error(err))
		return
	}
	c.handOnLocked(ctx, logs)
}

// handOnLocked hands a batch to the pipeline. A stored batch the pipeline
// took needs no write of its own: the next write-ahead replaces it, and
// markDoneLocked deletes the last one when the conversation detaches. Until
// then a crash sends it again, a legal redelivery; one storage write per
// batch instead of two is what that buys.
func (c *conversation) handOnLocked(ctx context.Context, logs plog.Logs) {
	if err := c.emitter.consume(ctx, logs); err != nil {
		c.watch.rl.Error("emit:"+c.id, "could not emit AEP events", zap.String("conversation", c.id), zap.Error(err))
		return
	}
	c.taken = c.journal != nil
}

// markDoneLocked deletes the stored pending batch once the pipeline took
// it, so that an orderly restart sends nothing again.
func (c *conversation) markDoneLocked(ctx context.Context) {
	if !c.taken {
		return
	}
	c.taken = false
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
			c.taken = false // the stored batch is this one now
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
	switch c.mapper.Status() {
	case mapping.StatusIdle, mapping.StatusFinished, mapping.StatusError, mapping.StatusStuck:
		return time.Since(c.lastSeen) >= d
	}
	return false
}
