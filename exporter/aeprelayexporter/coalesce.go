package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"net"
	"sync"
)

// coalesceFlushBytes bounds what a held chunk buffers before it is
// written anyway.
const coalesceFlushBytes = 64 << 10

// coalescingConn is the TCP connection under a relay socket (under TLS,
// when there is TLS). While a chunk of a batch is written it holds the
// frames, so that the chunk leaves in one write instead of one system call
// per frame; otherwise, as for the hello, the ping and the frames the
// socket writes on its own (pongs, close), it writes through.
type coalescingConn struct {
	net.Conn
	mu      sync.Mutex
	holding bool
	held    []byte
}

// dialCoalescing dials as the default dialer does and wraps the
// connection; dialed receives it.
func dialCoalescing(dialed **coalescingConn) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		*dialed = &coalescingConn{Conn: conn}
		return *dialed, nil
	}
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holding {
		return c.Conn.Write(p)
	}
	c.held = append(c.held, p...)
	if len(c.held) >= coalesceFlushBytes {
		if err := c.writeHeldLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// hold starts holding writes; release writes what is held and stops.
func (c *coalescingConn) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = true
}

func (c *coalescingConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	return c.writeHeldLocked()
}

func (c *coalescingConn) writeHeldLocked() error {
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	if cap(c.held) > 4*coalesceFlushBytes {
		c.held = nil // one oversize frame does not pin its buffer
	}
	return err
}
