package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
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
	frameBuffer = 1024
	// vendorTimeLayout is the server's naive isoformat() with microseconds.
	vendorTimeLayout = "2006-01-02T15:04:05.999999"
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
// everything that maps and emits, so seq order is emission order.
type conversation struct {
	id    string
	watch *serverWatch

	mu       sync.Mutex
	mapper   *mapping.Conversation
	emitter  *sessionEmitter
	seen     *recentIDs
	resumeTS string    // newest vendor timestamp of a persisted event seen
	lastSeen time.Time // when the last vendor event arrived
	ended    bool

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
	c.emitLocked(ctx, []*aep.Event{c.mapper.Start(created, time.Now())})
}

// end closes the session: the conversation left search or reached deleting.
func (c *conversation) end(ctx context.Context) {
	c.detach()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	c.emitLocked(ctx, c.mapper.End(time.Now(), c.resumeTS))
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

// attachOnce runs one socket: dial live-only, page the history over REST
// while the socket's frames buffer, then drain the buffer and follow live.
// History and live never interleave: every event is processed once, in log
// order, and the vendor-id window drops the overlap. live reports whether
// the attach got as far as following the socket.
func (c *conversation) attachOnce(ctx context.Context) (live bool, err error) {
	w := c.watch
	conn, err := w.api.dialEvents(ctx, c.id)
	if err != nil {
		return false, err
	}
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
	}()

	if err := c.replayHistory(ctx); err != nil {
		return false, fmt.Errorf("page history: %w", err)
	}

	var idle <-chan time.Time
	if w.idleDetach > 0 {
		t := time.NewTicker(max(w.idleDetach/4, 10*time.Millisecond))
		defer t.Stop()
		idle = t.C
	}
	first := true
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case f := <-frames:
			if f.err != nil {
				return true, f.err
			}
			c.handleFrame(ctx, f.data, first)
			first = false
		case <-idle:
			if c.idleExpired(w.idleDetach) {
				return true, errIdleDetached
			}
		}
	}
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
	return c.watch.api.searchEvents(ctx, c.id, since, func(raw json.RawMessage) error {
		c.handleEvent(ctx, raw, true, false)
		return ctx.Err()
	})
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

// handleFrame processes one live frame. The first frame of every
// connection is the server's connect-time full_state snapshot: it is taken
// before the history we just paged, so it may be older than what history
// told us and must not move the execution status backwards.
func (c *conversation) handleFrame(ctx context.Context, raw []byte, connectSnapshot bool) {
	c.handleEvent(ctx, raw, false, connectSnapshot)
}

func (c *conversation) handleEvent(ctx context.Context, raw []byte, persisted, connectSnapshot bool) {
	w := c.watch
	ev, err := mapping.DecodeEvent(raw)
	if err != nil {
		w.tel.decodeError(ctx, "event")
		w.rl.Error("decode:"+c.id, "skipping an agent-server event that cannot be decoded",
			zap.String("conversation", c.id), zap.Error(err))
		return
	}
	w.tel.vendorEvent(ctx, ev.Kind())

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
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
	}
	var out []*aep.Event
	if connectSnapshot {
		out = c.mapper.MapConnectSnapshot(ev, now)
	} else {
		out = c.mapper.Map(ev, now)
	}
	w.tel.mapped(ctx, time.Since(now))
	c.emitLocked(ctx, out)
	if c.mapper.Ended() {
		c.ended = true
	}
}

func (c *conversation) emitLocked(ctx context.Context, events []*aep.Event) {
	if err := c.emitter.emit(ctx, events); err != nil {
		c.watch.rl.Error("emit:"+c.id, "could not emit AEP events", zap.String("conversation", c.id), zap.Error(err))
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
