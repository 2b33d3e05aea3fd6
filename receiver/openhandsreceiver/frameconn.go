package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/gorilla/websocket"
	"golang.org/x/sync/semaphore"
)

// frameConn is the connection under a conversation socket (above TLS),
// read one WebSocket frame at a time: it never hands the WebSocket reader
// bytes past the end of the frame being read, so whatever has been
// received and not yet read waits here, where the read loop can ask
// whether a whole next data frame is already in (wholeFrameWaiting) and
// map it into the same batch, instead of emitting after every frame.
// Before startFrames it serves the HTTP handshake, never past the blank
// line that ends a response head, so no frame byte is read with it.
//
// Only the read side's pacing depends on the parse: the bytes themselves
// pass in order, unchanged, whatever it concludes. One goroutine reads it.
//
// It also holds each data frame's share of the receiver's frame budget
// (frameBudget), taken from the frame's announced length before any of
// its payload is read and given back when the next frame is asked for,
// the reader being done with this one, or on Close.
type frameConn struct {
	net.Conn

	budget *frameBudget // nil: no bound
	held   atomic.Int64 // budget bytes this connection holds
	closed context.Context
	close  context.CancelFunc

	buf []byte // received, not yet handed on: buf[r:w]
	r   int
	w   int

	framing bool
	// frameLeft is what remains of the current frame to hand on; final,
	// whether that frame ends its message.
	frameLeft int64
	final     bool
	// headEnd is how much of a response head's end ("\r\n\r\n") was
	// last handed on, before startFrames.
	headEnd int
}

// frameConnBuffer is what one read from the socket takes at most.
const frameConnBuffer = 4096

// framedReadBuffer is the WebSocket reader's buffer over a frameConn.
const framedReadBuffer = 512

// maxFrameHeader is the longest WebSocket frame header (RFC 6455 §5.2).
const maxFrameHeader = 14

func newFrameConn(conn net.Conn) *frameConn {
	closed, closeFn := context.WithCancel(context.Background())
	return &frameConn{Conn: conn, buf: make([]byte, frameConnBuffer), closed: closed, close: closeFn}
}

// startFrames is called once the handshake's response has been read; the
// frames that follow are read within budget (nil: unbounded).
func (c *frameConn) startFrames(budget *frameBudget) {
	c.framing = true
	c.budget = budget
}

// Close ends a wait for the budget, gives back what is held, and closes
// the connection. Any goroutine may call it.
func (c *frameConn) Close() error {
	c.close()
	c.budget.release(c.held.Swap(0))
	return c.Conn.Close()
}

// reserve takes the budget share of a data frame announcing payload bytes
// (control frames, at most 125 bytes, take none).
func (c *frameConn) reserve(opcode byte, payload int64) error {
	if opcode >= 8 {
		return nil
	}
	n, err := c.budget.acquire(c.closed, payload)
	if err != nil {
		return net.ErrClosed
	}
	c.held.Store(n)
	if c.closed.Err() != nil { // closed meanwhile: Close may have missed it
		c.budget.release(c.held.Swap(0))
		return net.ErrClosed
	}
	return nil
}

func (c *frameConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.r == c.w {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	if !c.framing {
		return c.readHead(p), nil
	}
	for c.frameLeft == 0 { // at a frame boundary: learn the next frame's length
		c.budget.release(c.held.Swap(0)) // the reader is done with the last one
		if header, payload, ok := frameHeader(c.buf[c.r:c.w]); ok {
			if err := c.reserve(c.buf[c.r]&0x0f, payload); err != nil {
				return 0, err
			}
			c.frameLeft, c.final = header+payload, c.buf[c.r]&0x80 != 0
			break
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p[:min(int64(len(p)), c.frameLeft)], c.buf[c.r:c.w])
	c.r += n
	c.frameLeft -= int64(n)
	return n, nil
}

// readHead hands on handshake bytes up to the end of a response head.
func (c *frameConn) readHead(p []byte) int {
	const end = "\r\n\r\n"
	n := 0
	for n < len(p) && c.r < c.w {
		b := c.buf[c.r]
		p[n] = b
		n++
		c.r++
		switch {
		case b == end[c.headEnd]:
			c.headEnd++
		case b == '\r':
			c.headEnd = 1
		default:
			c.headEnd = 0
		}
		if c.headEnd == len(end) {
			c.headEnd = 0
			break
		}
	}
	return n
}

// fill reads once from the socket into the free end of buf.
func (c *frameConn) fill() error {
	if c.r > 0 && (c.r == c.w || len(c.buf)-c.w < maxFrameHeader) {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	for {
		n, err := c.Conn.Read(c.buf[c.w:])
		c.w += n
		switch {
		case n > 0:
			return nil // an error with it comes again on the next read
		case err != nil:
			return err
		}
	}
}

// messageReceived reports whether the rest of the message being read is
// received: its current frame is final and all in, so reading the rest
// cannot block. Call it once the WebSocket reader has the message.
func (c *frameConn) messageReceived() bool {
	return c != nil && c.framing && c.final && c.frameLeft <= int64(c.w-c.r)
}

// wholeFrameWaiting reports whether a whole unfragmented data frame has
// been received and not yet read, after any control frames before it:
// reading it cannot block. Call it between messages.
func (c *frameConn) wholeFrameWaiting() bool {
	if c == nil {
		return false
	}
	if !c.framing || c.frameLeft != 0 {
		return false
	}
	for rest := c.buf[c.r:c.w]; ; {
		size, ok := frameSize(rest)
		if !ok || size > int64(len(rest)) {
			return false
		}
		fin, opcode := rest[0]&0x80 != 0, rest[0]&0x0f
		switch {
		case opcode >= 8: // a control frame: the reader answers it and goes on
			rest = rest[size:]
		case opcode == websocket.TextMessage || opcode == websocket.BinaryMessage:
			return fin
		default:
			return false
		}
	}
}

// frameSize is the length, header and payload, of the frame b starts with,
// once b holds its whole header.
func frameSize(b []byte) (int64, bool) {
	header, payload, ok := frameHeader(b)
	return header + payload, ok
}

// frameHeader is the header length and the announced payload length of
// the frame b starts with, once b holds its whole header.
func frameHeader(b []byte) (header, payload int64, ok bool) {
	if len(b) < 2 {
		return 0, 0, false
	}
	header, payload = 2, int64(b[1]&0x7f)
	switch payload {
	case 126:
		if len(b) < 4 {
			return 0, 0, false
		}
		header, payload = 4, int64(binary.BigEndian.Uint16(b[2:4]))
	case 127:
		if len(b) < 10 {
			return 0, 0, false
		}
		header, payload = 10, int64(binary.BigEndian.Uint64(b[2:10])&(1<<62-1))
	}
	if b[1]&0x80 != 0 {
		header += 4 // masking key
	}
	return header, payload, true
}

// frameBudget bounds the frame bytes in flight across every conversation
// socket of a receiver: a data frame takes its announced length, at most
// the whole budget (so a frame larger than the budget waits for all of it,
// and still passes), before any of its payload is read, and holds it while
// it is read, decoded, mapped and emitted. The bytes a frame costs on the
// heap are a small multiple of its length, so this bounds the heap that
// many conversations sending large frames at once can take.
type frameBudget struct {
	size     int64
	sem      *semaphore.Weighted
	inFlight *atomic.Int64 // otelcol_openhands_frame_bytes_in_flight
}

func newFrameBudget(size int64, inFlight *atomic.Int64) *frameBudget {
	return &frameBudget{size: size, sem: semaphore.NewWeighted(size), inFlight: inFlight}
}

// acquire waits for min(n, size) bytes, or for ctx to end, and returns how
// many it took. A nil budget takes nothing.
func (b *frameBudget) acquire(ctx context.Context, n int64) (int64, error) {
	if b == nil || n <= 0 {
		return 0, nil
	}
	n = min(n, b.size)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return 0, fmt.Errorf("wait for the frame budget: %w", err)
	}
	b.inFlight.Add(n)
	return n, nil
}

func (b *frameBudget) release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.inFlight.Add(-n)
	b.sem.Release(n)
}

// frameDialer returns a copy of d whose connections are frameConns, and
// where each dial leaves its own. Over TLS the frameConn must sit above
// TLS, so the handshake is done here, with d's TLS settings; through a
// proxy to a TLS server it cannot be, and such a socket has no frameConn
// (it emits after every frame).
func frameDialer(d *websocket.Dialer, u *url.URL) (websocket.Dialer, **frameConn) {
	dialed := new(*frameConn)
	framed := *d
	// The frameConn holds what is received: the WebSocket reader's own
	// buffer needs little more than a frame header.
	framed.ReadBufferSize = framedReadBuffer
	wrap := func(conn net.Conn, err error) (net.Conn, error) {
		if err != nil {
			return nil, err
		}
		*dialed = newFrameConn(conn)
		return *dialed, nil
	}
	if u.Scheme == "ws" {
		framed.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			return wrap(nd.DialContext(ctx, network, addr))
		}
		return framed, dialed
	}
	if d.Proxy != nil {
		if proxy, err := d.Proxy(&http.Request{URL: &url.URL{Scheme: "https", Host: u.Host}}); err != nil || proxy != nil {
			return *d, dialed
		}
	}
	framed.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		cfg := &tls.Config{}
		if d.TLSClientConfig != nil {
			cfg = d.TLSClientConfig.Clone()
		}
		td := tls.Dialer{Config: cfg} // an empty ServerName is the host of addr
		return wrap(td.DialContext(ctx, network, addr))
	}
	return framed, dialed
}
