package livetest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Front is a forward HTTP proxy on loopback in front of one agent server:
// the receiver's proxy_url. It takes REST requests in absolute form and
// WebSocket dials as CONNECT tunnels (how gorilla/websocket goes through a
// proxy), and hands both to one handler, as if the handler were the agent
// server at the endpoint the receiver was configured with.
type Front struct {
	handler http.Handler
	outer   *http.Server
	inner   *http.Server
	ln      net.Listener
	tunnels *tunnelListener
}

// StartFront serves h behind a new proxy listener on 127.0.0.1.
func StartFront(h http.Handler) (*Front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("front listen: %w", err)
	}
	f := &Front{handler: h, ln: ln, tunnels: newTunnelListener(ln.Addr())}
	f.outer = &http.Server{Handler: http.HandlerFunc(f.serveOuter), ReadHeaderTimeout: 10 * time.Second}
	f.inner = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.outer.Serve(ln) }()
	go func() { _ = f.inner.Serve(f.tunnels) }()
	return f, nil
}

// ProxyURL is the receiver's proxy_url.
func (f *Front) ProxyURL() string { return "http://" + f.ln.Addr().String() }

// Close stops both servers and every tunnel.
func (f *Front) Close() {
	_ = f.outer.Close()
	_ = f.inner.Close()
}

func (f *Front) serveOuter(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		f.handler.ServeHTTP(w, r)
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		conn.Close()
		return
	}
	f.tunnels.put(&bufferedConn{Conn: conn, r: buf.Reader})
}

// bufferedConn reads what the hijack had already buffered first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// tunnelListener hands CONNECT tunnels to the inner server.
type tunnelListener struct {
	addr   net.Addr
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func newTunnelListener(addr net.Addr) *tunnelListener {
	return &tunnelListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *tunnelListener) put(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *tunnelListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *tunnelListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *tunnelListener) Addr() net.Addr { return l.addr }
