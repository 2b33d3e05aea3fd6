package openhandstest

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faultConn is an accepted connection the stub can make misbehave below
// the WebSocket protocol, as a broken network or proxy would.
type faultConn struct {
	net.Conn
	// stalled: nothing more is forwarded either way, TCP stays open.
	stalled atomic.Bool
	// writeMu keeps a trickled frame whole: another write (a pong) waits
	// for its end, as it must on a real server.
	writeMu sync.Mutex
}

// faultListener hands out faultConns.
type faultListener struct{ net.Listener }

func (l faultListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: conn}, nil
}

// Read swallows what arrives while stalled: the client's frames, its pings
// included, never reach the server, which so answers nothing.
func (c *faultConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if err != nil || !c.stalled.Load() {
			return n, err
		}
	}
}

// Write swallows what the server writes while stalled.
func (c *faultConn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.stalled.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// trickle writes data as one text frame: its header at once, announcing
// the whole length, then its payload a byte every interval. It ends when
// the frame is out or a write fails (the connection closed).
func (c *faultConn) trickle(data []byte, interval time.Duration) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.Conn.Write(textFrameHeader(len(data))); err != nil {
		return err
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range data {
		<-tick.C
		if _, err := c.Conn.Write(data[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}

// textFrameHeader is the header of an unmasked, final text frame of n
// payload bytes, its length in the fewest bytes, as RFC 6455 §5.2 requires
// of a server.
func textFrameHeader(n int) []byte {
	switch {
	case n < 126:
		return []byte{0x81, byte(n)}
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16([]byte{0x81, 126}, uint16(n))
	default:
		return binary.BigEndian.AppendUint64([]byte{0x81, 127}, uint64(n))
	}
}
