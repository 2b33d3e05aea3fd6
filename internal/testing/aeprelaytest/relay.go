package aeprelaytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

// AwaitTimeout bounds every Await.
const AwaitTimeout = 10 * time.Second

// supportedVersions are the protocol versions this relay speaks.
var supportedVersions = []string{aep.Version}

// Relay is a running AEP relay on loopback. All methods are safe for
// concurrent use.
type Relay struct {
	cfg     Config
	log     *slog.Logger
	started time.Time
	// discovery and helloReply are the relay's declarations, marshalled once.
	discovery  []byte
	helloReply []byte

	lifeMu sync.Mutex // serializes Close and Restart

	mu         sync.Mutex
	addr       string
	srv        *http.Server
	serveDone  chan struct{}
	stopping   bool
	closed     bool
	down       bool
	token      string // in force: Config.Token until SetToken
	pong       PongMode
	httpConns  map[net.Conn]struct{}
	conns      map[*wsConn]struct{}
	streams    map[*sseStream]struct{}
	nextConnID int
	st         *state
	changed    chan struct{} // closed and replaced on every change, for WaitFor

	wsWG sync.WaitGroup // socket handlers; HTTP handlers are the server's
}

// state is what ClearState forgets.
type state struct {
	store      *store
	checker    stream.Checker
	seen       map[sessionKey]struct{} // (source, id) of the recorded Events
	received   int
	events     []Record
	violations []Violation
	hellos     []Hello
	frames     []Frame
	commands   []Command
}

func newState(cfg Config) *state {
	return &state{store: newStore(cfg.BufferPerSession, cfg.MaxSessions), seen: make(map[sessionKey]struct{})}
}

// New starts a relay on cfg.Addr (default: a random loopback port).
func New(cfg Config) (*Relay, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:       cfg,
		log:       cfg.Logger,
		started:   time.Now(),
		httpConns: make(map[net.Conn]struct{}),
		conns:     make(map[*wsConn]struct{}),
		streams:   make(map[*sseStream]struct{}),
		st:        newState(cfg),
		changed:   make(chan struct{}),
		token:     cfg.Token,
	}
	if r.discovery, r.helloReply, err = r.declarations(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("aeprelaytest: listen on %s: %w", cfg.Addr, err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	posture := "token auth; commands routed"
	if cfg.Token == "" {
		posture = "no token: watch-only, every command refused unauthorized"
	}
	r.log.Info("AEP relay listening", "url", r.URL(), "posture", posture,
		"buffer", cfg.BufferPerSession, "max_sessions", cfg.MaxSessions)
	return r, nil
}

// Start starts a relay and closes it when tb ends.
func Start(tb testing.TB, cfg Config) *Relay {
	tb.Helper()
	r, err := New(cfg)
	if err != nil {
		tb.Fatalf("start AEP relay: %v", err)
	}
	tb.Cleanup(r.Close)
	return r
}

// declarations marshals the discovery document and the relay's hello
// (AEP-0003 §3.4, §4), which share the capability block.
func (r *Relay) declarations() (discovery, hello []byte, err error) {
	capabilities := map[string]any{
		"filters":      []string{"attr-match"},
		"replay":       map[string]any{"buffer": r.cfg.BufferPerSession, "all": true},
		"capture":      []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull},
		"control":      map[string]any{"accepts": []string{}},
		"roster":       map[string]any{},
		"experimental": map[string]any{},
	}
	discovery, err = json.Marshal(map[string]any{
		"aep":          supportedVersions,
		"role":         "collector",
		"endpoints":    map[string]string{"events": "/events", "stream": "/stream", "socket": "/socket"},
		"capabilities": capabilities,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("aeprelaytest: marshal discovery: %w", err)
	}
	hello, err = json.Marshal(map[string]any{
		"type": "hello", "versions": supportedVersions, "role": "both", "capabilities": capabilities,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("aeprelaytest: marshal hello: %w", err)
	}
	return discovery, hello, nil
}

// URL returns the base URL, e.g. "http://127.0.0.1:41234"; it stays the
// same across Restart.
func (r *Relay) URL() string { return "http://" + r.addr }

// SocketURL returns the duplex binding's URL, e.g. "ws://127.0.0.1:41234/socket".
func (r *Relay) SocketURL() string { return "ws://" + r.addr + "/socket" }

// Addr returns the host:port the relay listens on.
func (r *Relay) Addr() string { return r.addr }

func (r *Relay) serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           r.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         r.trackConn,
		ErrorLog:          slog.NewLogLogger(r.log.Handler(), slog.LevelDebug),
	}
	done := make(chan struct{})
	r.mu.Lock()
	r.srv, r.serveDone, r.stopping = srv, done, false
	r.mu.Unlock()
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // http.ErrServerClosed once stopped
	}()
}

// trackConn keeps the open HTTP connections, for DropConnections.
func (r *Relay) trackConn(c net.Conn, s http.ConnState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch s {
	case http.StateNew:
		r.httpConns[c] = struct{}{}
	case http.StateHijacked, http.StateClosed:
		delete(r.httpConns, c)
	}
}

// stop drains: it stops accepting, sends every socket `closing` and a 1001
// close, ends every SSE stream with `: shutting-down`, and waits for all
// of it (bounded by DrainTimeout, after which what is left is dropped).
func (r *Relay) stop() {
	r.mu.Lock()
	srv, done := r.srv, r.serveDone
	if srv == nil {
		r.mu.Unlock()
		return
	}
	r.srv, r.stopping = nil, true
	for c := range r.conns {
		c.shutdownLocked()
	}
	for s := range r.streams {
		s.shutdownLocked()
	}
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	drained := make(chan struct{})
	go func() {
		r.wsWG.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		r.abortSockets()
		<-drained
	}
	<-done
}

func (r *Relay) abortSockets() {
	r.mu.Lock()
	conns := make([]*wsConn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
}

// Close drains and stops the relay (see Restart for what draining means).
// It is idempotent.
func (r *Relay) Close() {
	r.lifeMu.Lock()
	defer r.lifeMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.stop()
	r.log.Info("AEP relay stopped")
}

// Restart stops the relay as Close does — sockets get a `closing` frame
// and close 1001, SSE streams `: shutting-down` — then listens again on
// the same address, keeping or clearing its state.
func (r *Relay) Restart(mode RestartMode) error {
	r.lifeMu.Lock()
	defer r.lifeMu.Unlock()
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return errors.New("aeprelaytest: restart: relay is closed")
	}
	r.stop()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("aeprelaytest: restart: listen on %s: %w", r.addr, err)
	}
	r.mu.Lock()
	if mode == ClearState {
		r.st = newState(r.cfg)
	}
	r.notifyLocked()
	r.mu.Unlock()
	r.serve(ln)
	r.log.Info("AEP relay restarted", "url", r.URL(), "cleared", mode == ClearState)
	return nil
}

// SetDown makes the relay refuse every new request and socket handshake
// with 503 (true) or serve again (false). Open connections are untouched;
// pair it with DropConnections for an outage.
func (r *Relay) SetDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// SetToken rotates the bearer token: every new request and socket
// handshake must carry the new one, and one with the old is refused 401
// as a relay or its auth proxy does mid-rotation. Open connections are
// untouched (the token is checked at the upgrade). An empty token makes
// the relay tokenless and watch-only.
func (r *Relay) SetToken(token string) {
	r.mu.Lock()
	r.token = token
	r.mu.Unlock()
}

// SetPong sets how pings are answered from now on.
func (r *Relay) SetPong(mode PongMode) {
	r.mu.Lock()
	r.pong = mode
	r.mu.Unlock()
}

func (r *Relay) pongMode() PongMode {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pong
}

// DropConnections cuts every socket, SSE stream and idle HTTP connection
// at once, without closing frames, as a network failure would.
func (r *Relay) DropConnections() {
	r.mu.Lock()
	conns := make([]net.Conn, 0, len(r.httpConns))
	for c := range r.httpConns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	r.abortSockets()
	for _, c := range conns {
		_ = c.Close()
	}
}

// notifyLocked wakes every WaitFor. r.mu must be held.
func (r *Relay) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// WaitFor returns once cond holds, re-checking it whenever the relay's
// state changes, or ctx's error. cond must not block; it may call the
// relay's accessors.
func (r *Relay) WaitFor(ctx context.Context, cond func(*Relay) bool) error {
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if cond(r) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("aeprelaytest: wait: %w", ctx.Err())
		}
	}
}

// Await is WaitFor bounded by AwaitTimeout that fails tb, naming what it
// waited for. Call it from the test goroutine.
func (r *Relay) Await(tb testing.TB, what string, cond func(*Relay) bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), AwaitTimeout)
	defer cancel()
	if err := r.WaitFor(ctx, cond); err != nil {
		tb.Fatalf("waiting for %s: %v", what, err)
	}
}

// Events returns the admitted Events in arrival order, one per (source,
// id): the first arrival wins. Commands are included.
func (r *Relay) Events() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.st.events)
}

// Received counts the valid Events ingested, redeliveries included.
func (r *Relay) Received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.received
}

// SessionEvents returns one session's replay buffer in (epoch, seq) order.
func (r *Relay) SessionEvents(source, session string) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	entries := r.st.store.session(sessionKey{source, session})
	records := make([]Record, len(entries))
	for i, e := range entries {
		records[i] = e.record()
	}
	return records
}

// Sessions lists the buffered sessions, sorted by session then source.
func (r *Relay) Sessions() []SessionRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.store.sessions()
}

// Violations returns the rules broken so far, in order.
func (r *Relay) Violations() []Violation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.st.violations)
}

// Hellos returns every hello received, any role, in order (including ones
// refused version-unsupported).
func (r *Relay) Hellos() []Hello {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.st.hellos)
}

// Frames returns the non-Event frames received, in order.
func (r *Relay) Frames() []Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.st.frames)
}

// Commands returns every routing decision, in order.
func (r *Relay) Commands() []Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.st.commands)
}

// Subscribers counts the live consumers: SSE streams plus socket
// subscriptions.
func (r *Relay) Subscribers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.streams) + r.subscriptionsLocked()
}

// Connections describes the live sockets, by id.
func (r *Relay) Connections() []Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Conn, 0, len(r.conns))
	for c := range r.conns {
		out = append(out, c.describeLocked())
	}
	slices.SortFunc(out, func(a, b Conn) int { return a.ID - b.ID })
	return out
}

// SendCommand ingests raw as a command from an authorized sender
// connection and returns the relay-behalf refusal it earned, nil when it
// was routed. A tokenless relay refuses it `unauthorized` like any other.
// raw must be a valid command Event.
func (r *Relay) SendCommand(raw []byte) (*ErrorFrame, error) {
	raw = normalize(raw)
	ev, err := parseEvent(raw, nil)
	if err != nil {
		return nil, fmt.Errorf("aeprelaytest: send command: %w", err)
	}
	if !isCommand(ev.Type) {
		return nil, fmt.Errorf("aeprelaytest: send command: %s is not a command type", ev.Type)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ingestLocked(newIngested(raw, ev, BindingInjected, 0), nil), nil
}

// SendFrame queues raw, as is, on socket conn: a frame of any kind, valid
// or not, for fault injection.
func (r *Relay) SendFrame(conn int, raw []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		if c.id == conn {
			if !c.out.push(wsFrame{data: raw}, false) {
				return fmt.Errorf("aeprelaytest: send frame: connection %d is closing", conn)
			}
			return nil
		}
	}
	return fmt.Errorf("aeprelaytest: send frame: no live connection %d", conn)
}

// appendBounded appends v, dropping the oldest tenth of s first when it
// is full.
func appendBounded[T any](s []T, v T, limit int) []T {
	if len(s) >= limit {
		s = slices.Delete(s, 0, len(s)-limit+1+limit/10)
	}
	return append(s, v)
}

func (r *Relay) recordViolationLocked(v Violation) {
	r.st.violations = appendBounded(r.st.violations, v, r.cfg.MaxRecords)
	r.log.Warn("AEP violation", "kind", v.Kind, "binding", v.Binding, "conn", v.Conn,
		"type", v.Type, "id", v.EventID, "error", v.Err)
	r.notifyLocked()
}

func (r *Relay) protocolViolationLocked(conn int, format string, args ...any) {
	r.recordViolationLocked(Violation{
		Kind: ViolationProtocol, Binding: BindingSocket, Conn: conn,
		Err: fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...)),
	})
}

func (r *Relay) recordFrameLocked(conn int, typ string, raw []byte) {
	r.st.frames = appendBounded(r.st.frames, Frame{Conn: conn, Type: typ, Raw: raw}, r.cfg.MaxRecords)
	r.notifyLocked()
}

// routes is the relay's HTTP surface; every route answers 503 while the
// relay is down.
func (r *Relay) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", r.authorizedOnly(r.handlePost))
	mux.HandleFunc("GET /events", r.authorizedOnly(r.handleDiscovery))
	mux.HandleFunc("GET /.well-known/aep", r.authorizedOnly(r.handleDiscovery))
	mux.HandleFunc("GET /healthz", r.handleHealth)
	mux.HandleFunc("GET /stream", r.authorizedOnly(r.handleStream))
	mux.HandleFunc("GET /socket", r.authorizedOnly(r.handleSocket))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		down := r.down
		r.mu.Unlock()
		if down {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "unavailable", "detail": "relay is down"})
			return
		}
		mux.ServeHTTP(w, req)
	})
}

// bearer returns the request's token: the Authorization header, else the
// access_token query parameter (AEP-0003 §8.1; never logged).
func bearer(req *http.Request) string {
	if h := req.Header.Get("Authorization"); len(h) > len("Bearer ") && strings.EqualFold(h[:len("Bearer ")], "Bearer ") {
		return strings.TrimSpace(h[len("Bearer "):])
	}
	return req.URL.Query().Get("access_token")
}
