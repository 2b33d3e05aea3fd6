package openhandsreceiver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wsFrame builds one server-to-client frame (unmasked unless mask).
func wsFrame(fin bool, opcode byte, payload []byte, mask bool) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	var b1 byte
	if mask {
		b1 = 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, b1|byte(n))
	case n < 1<<16:
		out = append(out, b1|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, b1|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	if mask {
		out = append(out, 0, 0, 0, 0) // a zero key leaves the payload as is
	}
	return append(out, payload...)
}

// chunkConn serves data in reads of at most chunk bytes.
type chunkConn struct {
	net.Conn
	data  []byte
	chunk int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.chunk)], c.data)
	c.data = c.data[n:]
	return n, nil
}

func TestFrameSize(t *testing.T) {
	for _, c := range []struct {
		name  string
		frame []byte
		// lengthEnd is how many bytes it takes to know the length.
		lengthEnd int
	}{
		{"short", wsFrame(true, websocket.TextMessage, []byte("hi"), false), 2},
		{"empty", wsFrame(true, websocket.TextMessage, nil, false), 2},
		{"16-bit length", wsFrame(true, websocket.TextMessage, bytes.Repeat([]byte("x"), 300), false), 4},
		{"64-bit length", wsFrame(true, websocket.BinaryMessage, bytes.Repeat([]byte("x"), 70000), false), 10},
		{"masked", wsFrame(true, websocket.TextMessage, []byte("hi"), true), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			for cut := range c.lengthEnd {
				_, ok := frameSize(c.frame[:cut])
				assert.False(t, ok, "the length is not known from %d bytes", cut)
			}
			size, ok := frameSize(c.frame[:c.lengthEnd])
			require.True(t, ok)
			assert.Equal(t, int64(len(c.frame)), size)
		})
	}
}

func TestWholeFrameWaiting(t *testing.T) {
	text := wsFrame(true, websocket.TextMessage, []byte(`{"type":"durable"}`), false)
	ping := wsFrame(true, websocket.PingMessage, []byte("p"), false)
	first := wsFrame(false, websocket.TextMessage, []byte("part"), false)
	for _, c := range []struct {
		name     string
		buffered []byte
		want     bool
	}{
		{"nothing", nil, false},
		{"a whole text frame", text, true},
		{"half a frame", text[:len(text)/2], false},
		{"a header alone", text[:2], false},
		{"a ping, then a whole frame", append(bytes.Clone(ping), text...), true},
		{"a ping, then half a frame", append(bytes.Clone(ping), text[:5]...), false},
		{"a ping alone", ping, false},
		{"a message's first fragment", append(first, text...), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := newFrameConn(nil)
			fc.startFrames(nil)
			fc.w = copy(fc.buf, c.buffered)
			assert.Equal(t, c.want, fc.wholeFrameWaiting())
		})
	}
	var none *frameConn
	assert.False(t, none.wholeFrameWaiting(), "no frameConn: nothing is known to wait")
}

// TestMessageReceived: once the WebSocket reader has a message's header,
// the rest can be read without waiting only if its frame ends the message
// and is all in.
func TestMessageReceived(t *testing.T) {
	text := wsFrame(true, websocket.TextMessage, []byte(`{"type":"durable"}`), false)
	first := wsFrame(false, websocket.TextMessage, []byte("part"), false)
	for _, c := range []struct {
		name     string
		buffered []byte
		want     bool
	}{
		{"a whole frame", text, true},
		{"a whole frame and more", append(bytes.Clone(text), text[:5]...), true},
		{"half a frame", text[:len(text)/2], false},
		{"a message's first fragment", append(bytes.Clone(first), text...), false},
		{"an empty frame", wsFrame(true, websocket.TextMessage, nil, false), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := newFrameConn(nil)
			fc.startFrames(nil)
			fc.w = copy(fc.buf, c.buffered)
			n, err := fc.Read(make([]byte, 2)) // the header, as the reader takes it
			require.NoError(t, err)
			require.Equal(t, 2, n)
			assert.Equal(t, c.want, fc.messageReceived())
		})
	}
	var none *frameConn
	assert.False(t, none.messageReceived(), "no frameConn: nothing is known received")
}

// TestFrameConnReadsAFrameAtATime feeds a response head and frames in
// every chunking and checks that no read crosses the head's end or a
// frame's end, and that the bytes pass unchanged.
func TestFrameConnReadsAFrameAtATime(t *testing.T) {
	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
	frames := [][]byte{
		wsFrame(true, websocket.TextMessage, []byte(`{"seq":1}`), false),
		wsFrame(true, websocket.PingMessage, nil, false),
		wsFrame(true, websocket.TextMessage, bytes.Repeat([]byte("y"), 5000), false),
		wsFrame(true, websocket.TextMessage, []byte(`{"seq":3}`), false),
	}
	stream := append([]byte(head), bytes.Join(frames, nil)...)
	for _, chunk := range []int{1, 3, 7, 64, 4096, len(stream)} {
		fc := newFrameConn(&chunkConn{data: bytes.Clone(stream), chunk: chunk})
		assert.Equal(t, head, string(readPart(t, fc, len(head), "chunk %d: the handshake", chunk)))
		fc.startFrames(nil)
		for i, f := range frames {
			assert.Equal(t, f, readPart(t, fc, len(f), "chunk %d: frame %d", chunk, i))
		}
		_, err := fc.Read(make([]byte, 1))
		assert.ErrorIs(t, err, io.EOF)
	}
}

// readPart reads a part of n bytes from fc with reads that may return
// more, failing if one crosses the part's end.
func readPart(t *testing.T, fc *frameConn, n int, part string, args ...any) []byte {
	t.Helper()
	var got []byte
	for len(got) < n {
		p := make([]byte, 4096)
		k, err := fc.Read(p)
		require.NoError(t, err)
		got = append(got, p[:k]...)
		require.LessOrEqual(t, len(got), n, "%s: a read crossed its end", fmt.Sprintf(part, args...))
	}
	return got
}

// TestFrameDialerTellsAWaitingFrame dials a real WebSocket server through
// frameDialer, in the clear and over TLS: of frames received together,
// each but the last is known to have another waiting behind it; a ping
// between them does not count.
func TestFrameDialerTellsAWaitingFrame(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "ws", true: "wss"}[tlsOn], func(t *testing.T) { testFrameDialer(t, tlsOn) })
	}
}

func testFrameDialer(t *testing.T, tlsOn bool) {
	burst := bytes.Join([][]byte{
		wsFrame(true, websocket.TextMessage, []byte("one"), false),
		wsFrame(true, websocket.PingMessage, []byte("p"), false),
		wsFrame(true, websocket.TextMessage, []byte("two"), false),
		wsFrame(true, websocket.TextMessage, []byte("three"), false),
	}, nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		if _, _, err := conn.ReadMessage(); err != nil { // the client's go-ahead
			return
		}
		_, _ = conn.NetConn().Write(burst) // one write: the frames arrive together
		_, _, _ = conn.ReadMessage()       // until the client goes
	}))
	base := &websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if tlsOn {
		srv.StartTLS()
		base.TLSClientConfig = &tls.Config{RootCAs: x509.NewCertPool()}
		base.TLSClientConfig.RootCAs.AddCert(srv.Certificate())
	} else {
		srv.Start()
	}
	defer srv.Close()
	u, err := url.Parse("ws" + strings.TrimPrefix(srv.URL, "http"))
	require.NoError(t, err)
	dialer, fc := frameDialer(base, u)
	conn, resp, err := dialer.DialContext(context.Background(), u.String(), nil)
	require.NoError(t, err)
	resp.Body.Close()
	defer conn.Close()
	require.NotNil(t, *fc)
	(*fc).startFrames(nil)
	require.NoError(t, conn.WriteMessage(websocket.TextMessage, []byte("go")))
	time.Sleep(100 * time.Millisecond) // the burst is in the socket buffer

	var got []string
	var waiting []bool
	reader := newFrameReader(conn, 1<<20, defaultSocketSettings)
	for range 3 {
		data, err := reader.read(nil)
		require.NoError(t, err)
		got = append(got, string(data))
		waiting = append(waiting, (*fc).wholeFrameWaiting())
	}
	assert.Equal(t, []string{"one", "two", "three"}, got)
	assert.Equal(t, []bool{true, true, false}, waiting)
}

func TestFrameDialerLeavesATLSServerBehindAProxyAlone(t *testing.T) {
	u := &url.URL{Scheme: "wss", Host: "agent.example:443"}
	proxied := &websocket.Dialer{Proxy: func(*http.Request) (*url.URL, error) {
		return &url.URL{Scheme: "http", Host: "proxy.example:3128"}, nil
	}}
	dialer, _ := frameDialer(proxied, u)
	assert.Nil(t, dialer.NetDialTLSContext, "the TLS handshake through a proxy stays gorilla's")
	assert.Nil(t, dialer.NetDialContext)

	direct, _ := frameDialer(&websocket.Dialer{Proxy: http.ProxyFromEnvironment}, u)
	if p, _ := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: "https", Host: u.Host}}); p == nil {
		assert.NotNil(t, direct.NetDialTLSContext, "without a proxy the frameConn sits above TLS")
	}
}

// TestFrameBudgetBoundsFramesInFlight: a data frame takes its announced
// length from the receiver's budget before its payload is read, and gives
// it back when the next frame is asked for or the connection closes; a
// frame larger than the budget waits for all of it and passes.
func TestFrameBudgetBoundsFramesInFlight(t *testing.T) {
	var inFlight atomic.Int64
	budget := newFrameBudget(100, &inFlight)
	open := func(payload int) *frameConn {
		frames := append(wsFrame(true, websocket.TextMessage, bytes.Repeat([]byte("x"), payload), false),
			wsFrame(true, websocket.PingMessage, nil, false)...)
		fc := newFrameConn(&chunkConn{Conn: nopConn{}, data: frames, chunk: frameConnBuffer})
		fc.startFrames(budget)
		return fc
	}
	read := func(fc *frameConn) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := fc.Read(make([]byte, 512))
			done <- err
		}()
		return done
	}
	waits := func(done <-chan error, what string) {
		select {
		case err := <-done:
			t.Fatalf("%s read past the budget (%v)", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}

	a, b, large, closed := open(80), open(50), open(300), open(10)
	require.NoError(t, <-read(a)) // a's whole frame: 82 bytes
	assert.Equal(t, int64(80), inFlight.Load())
	bRead := read(b)
	waits(bRead, "b")
	require.NoError(t, <-read(a), "a asks for its next frame (a ping): it is done with the last")
	require.NoError(t, <-bRead)
	assert.Equal(t, int64(50), inFlight.Load())

	largeRead := read(large)
	waits(largeRead, "a frame larger than the budget")
	require.NoError(t, b.Close())
	require.NoError(t, <-largeRead, "it passes once it holds all of the budget")
	assert.Equal(t, int64(100), inFlight.Load())

	closedRead := read(closed)
	waits(closedRead, "a frame while the budget is lent out")
	require.NoError(t, closed.Close())
	require.ErrorIs(t, <-closedRead, net.ErrClosed, "Close ends the wait")
	require.NoError(t, large.Close())
	assert.Zero(t, inFlight.Load(), "nothing is left lent out")
}

// nopConn is a net.Conn whose Close succeeds; the rest is never called.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

// deadlineCounter counts the read deadlines set on the connection.
type deadlineCounter struct {
	net.Conn
	sets atomic.Int64
}

func (c *deadlineCounter) SetReadDeadline(t time.Time) error {
	c.sets.Add(1)
	return c.Conn.SetReadDeadline(t)
}

// TestFrameReaderMovesDeadlinesOnlyWhenNeeded: frames received whole are
// read under the keepalive's deadline, set once for frames that follow
// each other closely; a frame still arriving gets a deadline of its own,
// and the keepalive's is set again after it.
func TestFrameReaderMovesDeadlinesOnlyWhenNeeded(t *testing.T) {
	frame := func(s string) []byte { return wsFrame(true, websocket.TextMessage, []byte(s), false) }
	burst := bytes.Join([][]byte{frame("one"), frame("two"), frame("three")}, nil)
	split := frame(strings.Repeat("s", 200))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		raw := conn.NetConn()
		if _, _, err := conn.ReadMessage(); err != nil { // the client's go-ahead
			return
		}
		_, _ = raw.Write(burst) // one write: the frames arrive together
		if _, _, err := conn.ReadMessage(); err != nil {
			return
		}
		_, _ = raw.Write(split[:50])
		time.Sleep(100 * time.Millisecond) // the reader has the header, not the rest
		_, _ = raw.Write(split[50:])
		_, _ = raw.Write(frame("after"))
		_, _, _ = conn.ReadMessage() // until the client goes
	}))
	defer srv.Close()

	var counter *deadlineCounter
	dialer := websocket.Dialer{ReadBufferSize: framedReadBuffer, NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		counter = &deadlineCounter{Conn: conn}
		return newFrameConn(counter), nil
	}}
	conn, resp, err := dialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	resp.Body.Close()
	defer conn.Close()
	conn.NetConn().(*frameConn).startFrames(nil)
	reader := newFrameReader(conn, 1<<20, defaultSocketSettings)
	read := func(want string) {
		t.Helper()
		data, err := reader.read(nil)
		require.NoError(t, err)
		require.Equal(t, want, string(data))
	}
	counter.sets.Store(0)

	require.NoError(t, conn.WriteMessage(websocket.TextMessage, []byte("go")))
	time.Sleep(100 * time.Millisecond) // the burst is in the socket buffer
	read("one")
	read("two")
	read("three")
	assert.Equal(t, int64(1), counter.sets.Load(), "the keepalive's deadline, once")

	require.NoError(t, conn.WriteMessage(websocket.TextMessage, []byte("more")))
	read(strings.Repeat("s", 200))
	assert.Equal(t, int64(2), counter.sets.Load(), "the frame still arriving has its own deadline")
	read("after")
	assert.Equal(t, int64(3), counter.sets.Load(), "then the keepalive's again")
}
