package openhandstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Config configures a stub server. The zero value is a usable server
// without auth.
type Config struct {
	// Addr is where the server listens (default 127.0.0.1:0, a random
	// port). A fixed one is for state keyed by the server's host:port
	// that must outlive the test, such as a committed storage fixture.
	Addr string
	// SessionAPIKeys are the accepted session keys. Empty disables auth on
	// REST and WebSockets, as on the real server.
	SessionAPIKeys []string
	// AuthTimeout is the first-message auth window of both sockets
	// (default 10 s, the server's _FIRST_MESSAGE_AUTH_TIMEOUT_SECONDS).
	AuthTimeout time.Duration
	// MaxSubscribers is the per-conversation subscriber limit (default 50).
	// Like the real PubSub it counts the server's own persisting subscriber,
	// so at most MaxSubscribers-1 sockets fit.
	MaxSubscribers int
	// LegacyTransportDump mimics servers v1.31.2–v1.36.1, whose
	// event_transport_dump stripped `parent_id` and filtered `tools[]` on the
	// legacy socket and the events search. Off, events carry `parent_id` as in
	// v1.37.0+.
	LegacyTransportDump bool
	// WithoutSessionSocket mimics servers before v1.45.0, which have no
	// /sockets/session endpoint: its handshake is answered 404 (the real
	// server's router refuses an unknown WebSocket path before accept).
	WithoutSessionSocket bool
	// Location is the server's local time zone, used for naive event
	// timestamps and to normalise aware query datetimes (default UTC).
	Location *time.Location
	// Clock returns the current time (default time.Now). Return whole
	// seconds to get timestamps without a fractional part.
	Clock func() time.Time
	// WriteTimeout bounds every socket write (default 5 s).
	WriteTimeout time.Duration
	// MaxQueuedFrames and MaxQueuedBytes bound each socket's outbound queue
	// (defaults 1024 frames and 16 MiB). Overflow drops the connection with
	// close code 1013 "slow_consumer".
	MaxQueuedFrames int
	MaxQueuedBytes  int
	// MaxFrameBytes is the largest frame the session socket sends; a bigger
	// one drops the connection with 1013 "frame_too_large" (default 4 MiB).
	MaxFrameBytes int
	// OnRun, when set, plays the agent: it is called in its own goroutine
	// each time a run starts. Its context is cancelled by pause, interrupt,
	// delete, Restart and Close. When it returns uncancelled the run ends:
	// a still-running conversation becomes finished and a full_state
	// snapshot is published. It must return once ctx is cancelled: Close and
	// Restart wait for it. Without OnRun a run lasts until the test calls
	// [Conversation.FinishRun].
	OnRun func(ctx context.Context, c *Conversation)
	// Version is reported by /server_info (default "1.43.1").
	Version string
	// Webhooks are the server's webhooks (config webhooks): every
	// conversation's events, and its ConversationInfo on start, pause,
	// interrupt, delete and title change, are POSTed to each.
	Webhooks []WebhookSpec
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.AuthTimeout <= 0 {
		c.AuthTimeout = 10 * time.Second
	}
	if c.MaxSubscribers <= 0 {
		c.MaxSubscribers = 50
	}
	if c.Location == nil {
		c.Location = time.UTC
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.MaxQueuedFrames <= 0 {
		c.MaxQueuedFrames = 1024
	}
	if c.MaxQueuedBytes <= 0 {
		c.MaxQueuedBytes = 16 << 20
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = 4 << 20
	}
	if c.Version == "" {
		c.Version = "1.43.1"
	}
	return c
}

// SearchFault makes a search endpoint misbehave.
type SearchFault int

const (
	// SearchOK answers normally.
	SearchOK SearchFault = iota
	// SearchGarbage answers 200 with a body that is not JSON.
	SearchGarbage
	// SearchLoop answers the page but points next_page_id back at the
	// page's own first item, so a client that follows it never ends.
	SearchLoop
	// SearchServerError answers 500 like an unhandled exception.
	SearchServerError
)

// WriteFault makes the REST writes (every /api request but GET and HEAD)
// misbehave. The zero value serves them normally.
type WriteFault struct {
	// Delay holds each write this long before it is served, like a server
	// busy with a long step; a client that gives up first is not served.
	Delay time.Duration
	// Status, when set, answers each write with it and {"detail": Detail}
	// without acting on it (500 renders like an unhandled exception).
	Status int
	Detail string
	// AnswerDelay serves each write at once, then holds its answer this
	// long: the server acted, and a client that gives up (or dies) first
	// never learns it did.
	AnswerDelay time.Duration
}

// ErrConversationDeleted is returned by scripting calls on a deleted conversation.
var ErrConversationDeleted = errors.New("conversation deleted")

// Server is a running stub agent server on 127.0.0.1.
type Server struct {
	cfg     Config
	started time.Time

	mu            sync.Mutex
	addr          string
	httpSrv       *http.Server
	serveDone     chan struct{}
	stopping      bool
	closed        bool
	conversations map[string]*conversation
	nextCreated   int
	conns         map[*socketConn]struct{}
	nextConnID    int
	subsChanged   chan struct{} // closed and replaced when any subscription changes
	runCtx        context.Context
	runCancel     context.CancelFunc
	convFault     SearchFault
	eventFault    SearchFault
	onEventSearch func(conversationID string)
	writeFault    WriteFault
	hooks         *webhooks
	requests      []Request
	frames        []InboundFrame
	recordingGen  int

	connWG sync.WaitGroup // socket handlers, each of which waits for its writer
	runWG  sync.WaitGroup // OnRun goroutines
}

// NewServer starts a stub server on cfg.Addr, by default a random
// loopback port.
func NewServer(cfg Config) (*Server, error) {
	s := &Server{
		cfg:           cfg.withDefaults(),
		conversations: make(map[string]*conversation),
		conns:         make(map[*socketConn]struct{}),
		subsChanged:   make(chan struct{}),
		hooks:         newWebhooks(),
	}
	s.started = s.cfg.Clock()
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

// Start starts a stub server and closes it when tb ends.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		tb.Fatalf("start stub agent server: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// URL returns the base URL, e.g. "http://127.0.0.1:41234". It stays the same
// across Restart.
func (s *Server) URL() string { return "http://" + s.addr }

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.addr }

func (s *Server) serve(ln net.Listener) {
	runCtx, runCancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	done := make(chan struct{})
	s.mu.Lock()
	s.httpSrv = srv
	s.serveDone = done
	s.stopping = false
	s.runCtx, s.runCancel = runCtx, runCancel
	s.mu.Unlock()
	go func() {
		defer close(done)
		_ = srv.Serve(faultListener{ln}) // returns http.ErrServerClosed on stop
	}()
}

// stop shuts the listener, drops every socket and ends every run, then waits
// for all goroutines the server started.
// stop stops serving. A graceful stop is the real server's SIGTERM: every
// run under way is paused (closeEventServiceLocked) and every socket closed
// with 1012; otherwise (a crash) the sockets just drop.
func (s *Server) stop(graceful bool) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	s.stopping = true
	srv, done := s.httpSrv, s.serveDone
	if graceful {
		for _, c := range s.conversations {
			s.closeEventServiceLocked(c)
		}
	}
	for sc := range s.conns {
		if graceful {
			sc.out.fail(1012, "Service Restart")
			continue
		}
		sc.abort()
	}
	for _, c := range s.conversations {
		c.run = nil
		c.subs = make(map[*socketConn]struct{})
	}
	s.runCancel()
	s.notifySubsLocked()
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	<-done
	s.connWG.Wait()
	s.runWG.Wait()
}

// Close stops the server. Conversations are lost. It is safe to call twice.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.stop(false)
	s.hooks.close()
}

// Restart stops the server and starts it again on the same address, like a
// process restart: every socket is dropped (no close frame), runs end, and
// conversations keep their persisted event logs. Unpersisted traffic
// (full_state snapshots, deltas) is gone. A conversation persisted as
// running is recovered as the real server does: it becomes `error`, and the
// first unmatched action gets an AgentErrorEvent.
func (s *Server) Restart() error { return s.restart(false) }

// RestartGracefully restarts the server as SIGTERM does the 1.58.2 server:
// a run under way is paused (execution_status paused and a PauseEvent,
// persisted), every socket is closed with 1012, and the conversations come
// back as they were left (a paused one stays paused).
func (s *Server) RestartGracefully() error { return s.restart(true) }

func (s *Server) restart(graceful bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("restart stub agent server: server is closed")
	}
	s.mu.Unlock()
	s.stop(graceful)

	s.mu.Lock()
	for _, c := range s.conversations {
		s.recoverCrashedRunLocked(c)
	}
	s.mu.Unlock()

	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("restart stub agent server: listen on %s: %w", s.addr, err)
	}
	s.serve(ln)
	return nil
}

// SetConversationSearchFault makes GET /api/conversations/search misbehave.
func (s *Server) SetConversationSearchFault(f SearchFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.convFault = f
}

// OnEventSearch installs fn, called outside the server lock before each
// GET .../events/search page is built, so a test can append events while a
// client pages history: the adversarial interleaving of live and replayed
// events a client must survive. nil removes it.
func (s *Server) OnEventSearch(fn func(conversationID string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onEventSearch = fn
}

// SetWriteFault makes the REST writes misbehave until the next call.
func (s *Server) SetWriteFault(f WriteFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeFault = f
}

// SetEventSearchFault makes GET /api/conversations/{id}/events/search misbehave.
func (s *Server) SetEventSearchFault(f SearchFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventFault = f
}

func (s *Server) now() time.Time { return s.cfg.Clock().In(s.cfg.Location) }

// notifySubsLocked wakes WaitSockets callers.
func (s *Server) notifySubsLocked() {
	close(s.subsChanged)
	s.subsChanged = make(chan struct{})
}
