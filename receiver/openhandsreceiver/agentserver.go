package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
)

// agentServer is the receiver's whole vocabulary towards one OpenHands
// agent server: REST GETs and the events socket with its auth frame.
// Nothing else here, or anywhere in the receiver, writes to the server.
type agentServer struct {
	name     string
	base     *url.URL
	hostPort string
	key      configopaque.String
	client   *http.Client
	dialer   *websocket.Dialer
	maxFrame int64
	// sessionOnly is `socket: session`; legacyOnly is `socket: events`, or
	// what `auto` learned from a server without /sockets/session.
	sessionOnly bool
	legacyOnly  atomic.Bool
}

const (
	// maxResponseBytes bounds one REST response body.
	maxResponseBytes = 64 << 20
	// maxSearchPages stops a server whose next_page_id never ends.
	maxSearchPages = 10_000
	// authWriteTimeout keeps the auth frame well inside the server's 10 s
	// first-message window.
	authWriteTimeout = 5 * time.Second
	pageLimit        = "100"
)

// errAuthRejected marks a 401 from REST or a 4001 close from the socket:
// the configured key is wrong, retrying will not help.
var errAuthRejected = errors.New("agent server rejected the session API key")

// conversationInfo is the part of ConversationInfo the receiver reads.
type conversationInfo struct {
	ID              string `json:"id"`
	ExecutionStatus string `json:"execution_status"`
	CreatedAt       string `json:"created_at"`
	UpdatedAt       string `json:"updated_at"`
}

type conversationPage struct {
	Items      []conversationInfo `json:"items"`
	NextPageID *string            `json:"next_page_id"`
}

type eventPage struct {
	Items      []json.RawMessage `json:"items"`
	NextPageID *string           `json:"next_page_id"`
}

// searchConversations pages GET /api/conversations/search to the end,
// passing next_page_id back verbatim.
func (s *agentServer) searchConversations(ctx context.Context) ([]conversationInfo, error) {
	var all []conversationInfo
	err := s.pages(ctx, "/api/conversations/search", url.Values{}, func(body []byte) (*string, error) {
		var p conversationPage
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("conversation search page is not a ConversationPage: %w", err)
		}
		for i, c := range p.Items {
			if c.ID == "" {
				return nil, fmt.Errorf("conversation search item %d has no id", i)
			}
		}
		all = append(all, p.Items...)
		return p.NextPageID, nil
	})
	return all, err
}

// searchEvents pages GET /api/conversations/{id}/events/search in log order,
// from timestamp__gte=since when since is set, handing each raw item to fn.
func (s *agentServer) searchEvents(ctx context.Context, conversationID, since string, fn func(json.RawMessage) error) error {
	q := url.Values{"sort_order": {"TIMESTAMP"}}
	if since != "" {
		q.Set("timestamp__gte", since)
	}
	return s.pages(ctx, "/api/conversations/"+url.PathEscape(conversationID)+"/events/search", q, func(body []byte) (*string, error) {
		var p eventPage
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("event search page is not an event page: %w", err)
		}
		for _, item := range p.Items {
			if err := fn(item); err != nil {
				return nil, err
			}
		}
		return p.NextPageID, nil
	})
}

// pages follows next_page_id until it is null, refusing a server that
// repeats a page id (it would loop forever).
func (s *agentServer) pages(ctx context.Context, path string, q url.Values, page func([]byte) (*string, error)) error {
	q.Set("limit", pageLimit)
	seen := make(map[string]bool)
	for n := 0; ; n++ {
		if n >= maxSearchPages {
			return fmt.Errorf("GET %s: more than %d pages", path, maxSearchPages)
		}
		body, err := s.get(ctx, path, q)
		if err != nil {
			return err
		}
		next, err := page(body)
		if err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		if next == nil || *next == "" {
			return nil
		}
		if seen[*next] {
			return fmt.Errorf("GET %s: next_page_id %q repeats: the server's paging loops", path, *next)
		}
		seen[*next] = true
		q.Set("page_id", *next)
	}
}

// get is the receiver's only REST verb.
func (s *agentServer) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := s.base.JoinPath(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json")
	if s.key != "" {
		req.Header.Set("X-Session-API-Key", string(s.key))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("GET %s: %s: %w", path, resp.Status, errAuthRejected)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: unexpected status %s", path, resp.Status)
	case len(body) > maxResponseBytes:
		return nil, fmt.Errorf("GET %s: response larger than %d bytes", path, maxResponseBytes)
	}
	return body, nil
}

// Socket endpoints a server may offer (ServerConfig.Socket).
const (
	socketAuto    = "auto"
	socketEvents  = "events"
	socketSession = "session"
)

// errNoSessionSocket is the handshake refusal of a server that predates
// /sockets/session (v1.45.0): its router refuses unknown WebSocket paths
// before accept, which the client sees as 403 or 404.
var errNoSessionSocket = errors.New("agent server has no /sockets/session endpoint")

// dialConversation opens the conversation's socket: /sockets/session when
// the server has it (replaying every durable event after afterSeq), else
// the legacy /sockets/events, live-only. session reports which.
func (s *agentServer) dialConversation(ctx context.Context, conversationID string, afterSeq int64) (conn *websocket.Conn, session bool, err error) {
	if !s.legacyOnly.Load() {
		q := url.Values{"after_seq": {strconv.FormatInt(afterSeq, 10)}}
		conn, err = s.dial(ctx, "/sockets/session", conversationID, q)
		switch {
		case err == nil:
			return conn, true, nil
		case !errors.Is(err, errNoSessionSocket) || s.sessionOnly:
			return nil, false, err
		}
		// auto: an older server. Remember it, so later attaches go straight
		// to the legacy socket.
		s.legacyOnly.Store(true)
	}
	conn, err = s.dial(ctx, "/sockets/events", conversationID, nil)
	return conn, false, err
}

// dial opens one socket and authenticates with the first-message auth
// frame. The key never rides in the URL, where proxies would log it. The
// legacy socket is opened without resend_mode (live-only): the receiver
// pages history over REST itself, so replay never interleaves with live
// frames.
func (s *agentServer) dial(ctx context.Context, prefix, conversationID string, q url.Values) (*websocket.Conn, error) {
	u, err := endpoint.WebSocket(s.base.JoinPath(prefix, conversationID))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", prefix, err)
	}
	u.RawQuery = q.Encode()
	conn, resp, err := s.dialer.DialContext(ctx, u.String(), nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		switch {
		case resp == nil:
			return nil, fmt.Errorf("dial %s: %w", prefix, err)
		case prefix == "/sockets/session" && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden):
			return nil, fmt.Errorf("dial %s: %s: %w", prefix, resp.Status, errNoSessionSocket)
		case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized:
			return nil, fmt.Errorf("dial %s: %s: %w", prefix, resp.Status, errAuthRejected)
		default:
			return nil, fmt.Errorf("dial %s: %s: %w", prefix, resp.Status, err)
		}
	}
	conn.SetReadLimit(s.maxFrame)
	if err := s.sendAuthFrame(conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// sendAuthFrame writes {"type":"auth","session_api_key":...}: the only
// frame the receiver ever writes to an agent server. Without a configured
// key the server accepts at once and nothing is written.
func (s *agentServer) sendAuthFrame(conn *websocket.Conn) error {
	if s.key == "" {
		return nil
	}
	frame, err := json.Marshal(struct {
		Type          string `json:"type"`
		SessionAPIKey string `json:"session_api_key"`
	}{"auth", string(s.key)})
	if err != nil {
		return fmt.Errorf("encode auth frame: %w", err)
	}
	if err := conn.SetWriteDeadline(time.Now().Add(authWriteTimeout)); err != nil {
		return fmt.Errorf("send auth frame: %w", err)
	}
	if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		return fmt.Errorf("send auth frame: %w", err)
	}
	return conn.SetWriteDeadline(time.Time{})
}

// hostPortOf returns host:port of the endpoint with the scheme's default
// port filled in, the stable server identity inside AEP sources.
func hostPortOf(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	return net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
}
