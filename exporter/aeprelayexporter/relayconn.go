package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// relayConn is one handshaken WebSocket connection to the relay. Writes
// are serialized, a chunk at a time; the read loop is the connection
// manager's.
type relayConn struct {
	ws *websocket.Conn
	// tcp is under ws; it holds each chunk's frames until the chunk is
	// written.
	tcp *coalescingConn

	writeMu sync.Mutex

	waitMu sync.Mutex
	// batches are the written batches awaiting their pong, by ping token.
	batches map[string]*batchWait
	// awaiting is the unconfirmed batch of each event written, by event
	// id: where an error frame naming an event as its cause lands.
	awaiting map[string]*batchWait

	failOnce sync.Once
	// closed is closed when the connection has failed; failure says why.
	closed  chan struct{}
	failure error
}

// batchWait is one batch between its write and its pong. The relay handles
// frames in order, so every error frame about the batch's events arrives
// before the pong of the ping written after them.
type batchWait struct {
	token string
	// pong is closed when the relay answers the batch's ping.
	pong chan struct{}
	// refused holds the relay's refusals of the batch's events, by id.
	refused map[string]relayRefusal
}

// relayRefusal is an error frame that named one of our events as its cause.
type relayRefusal struct {
	code, detail string
}

func newRelayConn(ws *websocket.Conn, tcp *coalescingConn) *relayConn {
	return &relayConn{
		ws:      ws,
		tcp:     tcp,
		batches: make(map[string]*batchWait), awaiting: make(map[string]*batchWait),
		closed: make(chan struct{}),
	}
}

// write sends one text frame.
func (c *relayConn) write(deadline time.Time, frame []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := c.ws.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return c.ws.WriteMessage(websocket.TextMessage, frame)
}

// writeJSON sends one frame.
func (c *relayConn) writeJSON(deadline time.Time, frame any) error {
	raw, err := json.Marshal(frame)
	if err != nil {
		return err
	}
	return c.write(deadline, raw)
}

// writeChunk is how many events are converted ahead of their write.
const writeChunk = 64

// writeEvents registers events with w and sends them, one frame each in
// order, in one write (coalescingConn). The batch's ping goes after its
// last chunk: the relay handles frames in order, so its pong confirms
// them all.
func (c *relayConn) writeEvents(deadline time.Time, w *batchWait, events []outboundEvent) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := c.ws.SetWriteDeadline(deadline); err != nil {
		return err
	}
	c.register(w, events)
	c.tcp.hold()
	for _, ev := range events {
		if err := c.ws.WriteMessage(websocket.TextMessage, ev.raw); err != nil {
			_ = c.tcp.release()
			return err
		}
	}
	return c.tcp.release()
}

// await registers a batch before any of it is written.
func (c *relayConn) await(token string) *batchWait {
	w := &batchWait{token: token, pong: make(chan struct{})}
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	c.batches[token] = w
	return w
}

// register adds events to w before they are written.
func (c *relayConn) register(w *batchWait, events []outboundEvent) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	for _, ev := range events {
		c.awaiting[ev.id] = w
	}
}

// settle unregisters a batch, whose events (the groups its part keeps)
// include every one registered with it, and returns the refusals it got;
// none can land on it afterwards.
func (c *relayConn) settle(w *batchWait, groups [][]outboundEvent) map[string]relayRefusal {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	delete(c.batches, w.token)
	for _, group := range groups {
		for _, ev := range group {
			if c.awaiting[ev.id] == w {
				delete(c.awaiting, ev.id)
			}
		}
	}
	return w.refused
}

// resolvePong delivers a pong; pongs of keepalive pings match nothing.
func (c *relayConn) resolvePong(token string) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	if w, ok := c.batches[token]; ok {
		close(w.pong)
		delete(c.batches, token)
	}
}

// refuse records the relay's refusal of the unconfirmed event id, and
// reports whether id named one.
func (c *relayConn) refuse(id string, r relayRefusal) bool {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	w, ok := c.awaiting[id]
	if !ok {
		return false
	}
	if w.refused == nil {
		w.refused = make(map[string]relayRefusal)
	}
	w.refused[id] = r
	return true
}

// fail ends the connection; the first cause is kept.
func (c *relayConn) fail(cause error) {
	c.failOnce.Do(func() {
		c.failure = cause
		close(c.closed)
		_ = c.ws.Close()
	})
}

// cause is why the connection ended; call it after closed is closed.
func (c *relayConn) cause() error {
	<-c.closed
	return c.failure
}

// closeOrderly announces the close (closing frame, then the close
// handshake) and gives the relay grace to answer before the socket goes.
func (c *relayConn) closeOrderly(grace time.Duration, cause error) {
	deadline := time.Now().Add(grace)
	_ = c.writeJSON(deadline, closingFrame{Type: frameClosing, Reason: "collector shutting down", Delivered: []any{}})
	_ = c.ws.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseGoingAway, "collector shutting down"), deadline)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-c.closed: // the read loop saw the relay's close
	case <-timer.C:
	}
	c.fail(cause)
}
