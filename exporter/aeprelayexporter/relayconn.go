package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// relayConn is one handshaken WebSocket connection to the relay. Writes
// are serialized (a batch and its confirming ping go out back to back);
// the read loop is the connection manager's.
type relayConn struct {
	ws *websocket.Conn

	writeMu sync.Mutex

	pongMu sync.Mutex
	// pongs are the confirmations awaited, keyed by ping token.
	pongs map[string]chan struct{}

	failOnce sync.Once
	// closed is closed when the connection has failed; failure says why.
	closed  chan struct{}
	failure error
}

func newRelayConn(ws *websocket.Conn) *relayConn {
	return &relayConn{ws: ws, pongs: make(map[string]chan struct{}), closed: make(chan struct{})}
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

// writeBatch sends the events, one frame each in order, then the ping
// whose pong confirms them: the relay handles frames in order.
func (c *relayConn) writeBatch(deadline time.Time, events []outboundEvent, ping []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := c.ws.SetWriteDeadline(deadline); err != nil {
		return err
	}
	for _, ev := range events {
		if err := c.ws.WriteMessage(websocket.TextMessage, ev.raw); err != nil {
			return err
		}
	}
	return c.ws.WriteMessage(websocket.TextMessage, ping)
}

// expectPong registers a confirmation before its ping is written.
func (c *relayConn) expectPong(token string) <-chan struct{} {
	ch := make(chan struct{})
	c.pongMu.Lock()
	defer c.pongMu.Unlock()
	c.pongs[token] = ch
	return ch
}

func (c *relayConn) forgetPong(token string) {
	c.pongMu.Lock()
	defer c.pongMu.Unlock()
	delete(c.pongs, token)
}

// resolvePong delivers a pong; pongs of keepalive pings match nothing.
func (c *relayConn) resolvePong(token string) {
	c.pongMu.Lock()
	defer c.pongMu.Unlock()
	if ch, ok := c.pongs[token]; ok {
		close(ch)
		delete(c.pongs, token)
	}
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
