package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
)

// errShutDown fails pushes that outlive the connection manager.
var errShutDown = errors.New("aeprelay exporter is shut down")

// socketTransport is the WebSocket binding. A background connection
// manager dials, says hello, reads every inbound frame and redials with
// backoff; pushes wait for its connection, write their events and confirm
// them with a ping/pong round trip.
type socketTransport struct {
	cfg     *Config
	logger  *zap.Logger
	rate    *ratelog.Logger
	tel     *telemetry
	status  *statusReporter
	relay   socketEndpoint
	pingSeq atomic.Int64
	// drop reports an event the relay refused on its own.
	drop func(context.Context, refusal)

	// Set by start.
	dialer   websocket.Dialer
	auth     http.RoundTripper // the auth extension's chain, ending in headerCapture
	control  *controlLink      // nil without a control key
	instance string
	stop     context.CancelFunc
	done     chan struct{} // closed when the manager exits

	mu      sync.Mutex
	conn    *relayConn    // nil while disconnected
	lastErr error         // why there is no connection
	fatal   error         // a permanent failure; the manager has stopped
	changed chan struct{} // closed and replaced on every state change
}

func newSocketTransport(cfg *Config, logger *zap.Logger, rate *ratelog.Logger, tel *telemetry, status *statusReporter, drop func(context.Context, refusal)) (*socketTransport, error) {
	relay, err := newSocketEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	return &socketTransport{
		cfg: cfg, logger: logger, rate: rate, tel: tel, status: status, drop: drop,
		relay: relay, changed: make(chan struct{}),
	}, nil
}

func (s *socketTransport) start(ctx context.Context, host component.Host) error {
	tlsCfg, err := s.cfg.TLS.LoadTLSConfig(ctx)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	proxy := http.ProxyFromEnvironment
	if s.cfg.ProxyURL != "" {
		u, perr := url.ParseRequestURI(s.cfg.ProxyURL)
		if perr != nil {
			return fmt.Errorf("proxy_url: %w", perr)
		}
		proxy = http.ProxyURL(u)
	}
	s.dialer = websocket.Dialer{
		Proxy:            proxy,
		TLSClientConfig:  tlsCfg,
		HandshakeTimeout: s.cfg.HelloTimeout,
		ReadBufferSize:   s.cfg.ReadBufferSize,
		WriteBufferSize:  s.cfg.WriteBufferSize,
	}
	if s.cfg.Auth.HasValue() {
		client, aerr := s.cfg.Auth.Get().GetHTTPClientAuthenticator(ctx, host.GetExtensions())
		if aerr != nil {
			return fmt.Errorf("auth: %w", aerr)
		}
		if s.auth, aerr = client.RoundTripper(headerCapture{}); aerr != nil {
			return fmt.Errorf("auth: %w", aerr)
		}
	}
	if s.cfg.Control != nil {
		h, ferr := findControlHandler(*s.cfg.Control, host.GetExtensions())
		if ferr != nil {
			return ferr
		}
		h.Bind()
		s.control = &controlLink{handler: h, authenticated: len(s.cfg.credentials()) > 0}
		if len(h.Accepts()) > 0 && !s.control.authenticated {
			s.logger.Warn("control: the gate is open but this exporter sends the relay no credentials; "+
				"the hello declares accepts: [] and every command is rejected unsupported (set token or auth)", zap.String("relay", s.relay.display))
		}
	}
	s.instance = s.cfg.Instance
	if s.instance == "" {
		hostname, herr := os.Hostname()
		if herr != nil {
			hostname = "unknown"
		}
		s.instance = fmt.Sprintf("%s/%d", hostname, os.Getpid())
	}
	// The manager outlives Start's context; shutdown stops it.
	runCtx, stop := context.WithCancel(context.Background())
	s.stop, s.done = stop, make(chan struct{})
	go s.run(runCtx)
	return nil
}

func (s *socketTransport) shutdown(ctx context.Context) error {
	if s.stop == nil {
		return nil
	}
	s.stop()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close the AEP relay connection: %w", ctx.Err())
	}
}

// nextPing returns a fresh t and its key.
func (s *socketTransport) nextPing() (json.RawMessage, string) {
	t := strconv.FormatInt(s.pingSeq.Add(1), 10)
	return json.RawMessage(t), t
}

func (s *socketTransport) setState(conn *relayConn, lastErr, fatal error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn, s.lastErr = conn, lastErr
	if fatal != nil {
		s.fatal = fatal
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// connected waits for the manager's connection, up to ctx.
func (s *socketTransport) connected(ctx context.Context) (*relayConn, error) {
	for {
		s.mu.Lock()
		conn, lastErr, fatal, changed := s.conn, s.lastErr, s.fatal, s.changed
		s.mu.Unlock()
		if fatal != nil {
			return nil, fatal
		}
		if conn != nil {
			select {
			case <-conn.closed: // failed; the manager is about to redial
			default:
				return conn, nil
			}
		}
		select {
		case <-changed:
		case <-s.done:
			return nil, errShutDown
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("AEP relay not connected (%w): %w", lastErr, ctx.Err())
			}
			return nil, fmt.Errorf("AEP relay not connected yet: %w", ctx.Err())
		}
	}
}

// send writes one push's events in order and waits for the pong that
// confirms them. An event the relay refused by an error frame naming it is
// dropped, counted and logged, and never resent: the same bytes would be
// refused again. Any other failure is retryable: exporterhelper resends
// the same ids, and the relay dedupes buffer admission on (source, id).
func (s *socketTransport) send(ctx context.Context, src *pushSource) error {
	conn, err := s.connected(ctx)
	if err != nil {
		return err
	}
	t, token := s.nextPing()
	ping, err := json.Marshal(pingFrame{Type: framePing, T: t})
	if err != nil {
		return consumererror.NewPermanent(err)
	}
	wait := conn.await(token)
	err = s.confirm(ctx, conn, wait, src, ping)
	return s.settle(ctx, src.all().events, conn.settle(wait), err)
}

// confirm writes the push's events and their ping and waits for the pong.
func (s *socketTransport) confirm(ctx context.Context, conn *relayConn, wait *batchWait, src *pushSource, ping []byte) error {
	start, err := conn.writeBatch(writeDeadline(ctx, s.cfg.ConfirmTimeout), wait, src, ping)
	n := len(wait.events)
	if err != nil {
		err = fmt.Errorf("write events to the AEP relay (%d of the batch so far): %w", n, err)
		conn.fail(err)
		return err
	}
	timer := time.NewTimer(s.cfg.ConfirmTimeout)
	defer timer.Stop()
	select {
	case <-wait.pong:
		s.tel.confirmed(ctx, start)
		return nil
	case <-conn.closed:
		return fmt.Errorf("AEP relay connection lost before it confirmed %d events: %w", n, conn.cause())
	case <-timer.C:
		err := fmt.Errorf("AEP relay did not confirm %d events within confirm_timeout (%s)", n, s.cfg.ConfirmTimeout)
		// A relay that answers no ping is stuck: redial.
		conn.fail(err)
		return err
	case <-ctx.Done():
		return fmt.Errorf("wait for the AEP relay to confirm %d events: %w", n, ctx.Err())
	}
}

// settle accounts for a batch: the events the relay refused are dropped,
// whatever happened to the rest; the rest are sent when err is nil, and
// still to go otherwise.
func (s *socketTransport) settle(ctx context.Context, events []outboundEvent, refused map[string]relayRefusal, err error) error {
	if len(refused) == 0 {
		if err == nil {
			s.tel.sent(ctx, len(events))
		}
		return err
	}
	pending := make([]outboundEvent, 0, len(events))
	for _, ev := range events {
		if r, ok := refused[ev.id]; ok {
			s.drop(ctx, ev.refusedByRelay(reasonRelayRefused, r.code, r.detail))
			continue
		}
		pending = append(pending, ev)
	}
	if err == nil {
		s.tel.sent(ctx, len(pending))
		return nil
	}
	return &unsentError{err: err, pending: pending}
}

func writeDeadline(ctx context.Context, fallback time.Duration) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(fallback)
}
