package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/collector/consumer/consumererror"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
)

// maxInboundFrame bounds one relay frame (the reference relay's
// AEP_MAX_BODY).
const maxInboundFrame = maxFrame

// maxFrame is the reference relay's AEP_MAX_BODY, which bounds a socket
// frame either way.
const maxFrame = 16 << 20

// socketEndpoint is {endpoint}/socket in its two forms: the ws or wss URL
// to dial, and the http or https URL the upgrade request travels to (what
// an auth extension sees).
type socketEndpoint struct {
	dial, upgrade string
	// display has no userinfo or query, for logs.
	display string
}

func newSocketEndpoint(base string) (socketEndpoint, error) {
	u, err := url.Parse(base)
	if err != nil {
		return socketEndpoint{}, fmt.Errorf("endpoint: %w", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/socket"
	u.RawPath = ""
	ws, err := endpoint.WebSocket(u)
	if err != nil {
		return socketEndpoint{}, fmt.Errorf("endpoint: %w", err)
	}
	return socketEndpoint{dial: ws.String(), upgrade: u.String(), display: redactURL(ws)}, nil
}

// redactURL drops what must never be logged: userinfo and the query
// (which may carry access_token).
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// connect dials l's link, says hello and waits for the relay's hello.
func (s *socketTransport) connect(ctx context.Context, l *relayLink) (*relayConn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.HelloTimeout)
	defer cancel()
	header, err := s.upgradeHeader(ctx)
	if err != nil {
		return nil, err
	}
	dialer := s.dialer
	var tcp *coalescingConn
	dialer.NetDialContext = dialCoalescing(&tcp)
	ws, resp, err := dialer.DialContext(ctx, s.relay.dial, header)
	if err != nil {
		return nil, s.dialError(resp, err)
	}
	ws.SetReadLimit(maxInboundFrame)
	conn := newRelayConn(ws, tcp)
	deadline, _ := ctx.Deadline()
	hello := newHello(l.agent, s.instance, s.linkEmits(l), s.cfg.MaxCapture, declaredControl(l.control))
	if err := conn.writeJSON(deadline, hello); err != nil {
		conn.fail(err)
		return nil, fmt.Errorf("send hello to the AEP relay: %w", err)
	}
	if err := awaitRelayHello(conn.ws, deadline); err != nil {
		conn.fail(err)
		return nil, err
	}
	return conn, nil
}

func (s *socketTransport) dialError(resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("dial AEP relay %s: %w", s.relay.display, err)
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return &credentialsError{relay: s.relay.display, code: resp.StatusCode}
	case http.StatusUpgradeRequired:
		return consumererror.NewPermanent(fmt.Errorf("AEP relay %s does not speak AEP %s (HTTP 426)", s.relay.display, aep.Version))
	}
	return fmt.Errorf("AEP relay %s refused the WebSocket upgrade (HTTP %d): %w", s.relay.display, resp.StatusCode, err)
}

// linkEmits is the hello's emits: the configured categories on the
// agent's link (an empty list, not null, when none), none declared on the
// links of other agents.
func (s *socketTransport) linkEmits(l *relayLink) []string {
	if l.agent != s.cfg.Agent {
		return nil
	}
	if s.cfg.Emits == nil {
		return []string{}
	}
	return s.cfg.Emits
}

// credentialsError is a relay's 401 or 403 (AEP-0003 §8). It is
// retryable, never permanent: a token being rotated, an auth proxy
// restarting or a token the operator is about to fix are states that
// change without a collector restart, and a permanent error would drop
// every later event.
type credentialsError struct {
	relay string
	code  int
}

func (e *credentialsError) Error() string {
	return fmt.Sprintf("AEP relay %s refused the credentials (HTTP %d): check token or auth", e.relay, e.code)
}

// awaitRelayHello reads until the relay's hello (AEP-0003 §2.3): one
// selected version, ours. Frames before it are ignored.
func awaitRelayHello(ws *websocket.Conn, deadline time.Time) error {
	if err := ws.SetReadDeadline(deadline); err != nil {
		return err
	}
	for {
		kind, raw, err := ws.ReadMessage()
		if err != nil {
			return fmt.Errorf("wait for the AEP relay's hello: %w", err)
		}
		if kind != websocket.TextMessage {
			continue
		}
		f, err := parseFrame(raw)
		if err != nil {
			return fmt.Errorf("wait for the AEP relay's hello: %w", err)
		}
		switch f.Type {
		case frameHello:
			if len(f.Versions) != 1 || f.Versions[0] != aep.Version {
				return consumererror.NewPermanent(fmt.Errorf("AEP relay hello selected versions %v; this exporter speaks only %s", f.Versions, aep.Version))
			}
			return nil
		case frameError:
			rerr := &relayError{code: f.Code, detail: f.detailText(), versions: f.Versions}
			if rerr.fatal() {
				return consumererror.NewPermanent(rerr)
			}
			return rerr
		}
	}
}

// headerCapture ends the auth extension's round-tripper chain: instead of
// sending the request, it hands back the headers the extension set, for
// the WebSocket upgrade request.
type headerCapture struct{}

type capturedHeaderKey struct{}

func (headerCapture) RoundTrip(req *http.Request) (*http.Response, error) {
	if dst, ok := req.Context().Value(capturedHeaderKey{}).(*http.Header); ok {
		*dst = req.Header.Clone()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// upgradeHeader is the upgrade request's headers: configured headers, the
// bearer token, and whatever the auth extension adds (run per dial, so
// rotating credentials stay fresh).
func (s *socketTransport) upgradeHeader(ctx context.Context) (http.Header, error) {
	header := http.Header{}
	for name, value := range s.cfg.Headers.Iter {
		header.Set(name, string(value))
	}
	if s.cfg.Token != "" {
		header.Set("Authorization", "Bearer "+string(s.cfg.Token))
	}
	if s.auth == nil {
		return header, nil
	}
	var captured http.Header
	req, err := http.NewRequestWithContext(context.WithValue(ctx, capturedHeaderKey{}, &captured), http.MethodGet, s.relay.upgrade, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	req.Header = header
	resp, err := s.auth.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("auth extension refused the upgrade request: %w", err)
	}
	_ = resp.Body.Close()
	if captured == nil {
		return nil, errors.New("auth extension did not pass the upgrade request on")
	}
	return captured, nil
}
