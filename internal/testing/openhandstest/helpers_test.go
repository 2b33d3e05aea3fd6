package openhandstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait in these tests.
const waitTimeout = 5 * time.Second

const testKey = "sk-session-test"

func ctxWithTimeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// socketURL builds ws://.../sockets/{events|session}/{id}?query.
func socketURL(s *Server, endpoint Endpoint, id string, query url.Values) string {
	u := "ws://" + s.Addr() + string(endpoint) + "/" + id
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

// dial opens a client socket; the response is returned for handshake checks.
func dial(t *testing.T, s *Server, endpoint Endpoint, id string, query url.Values, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	dialer := websocket.Dialer{HandshakeTimeout: waitTimeout}
	conn, resp, err := dialer.Dial(socketURL(s, endpoint, id, query), header)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if conn != nil {
		t.Cleanup(func() { _ = conn.Close() })
	}
	return conn, resp, err
}

func mustDial(t *testing.T, s *Server, endpoint Endpoint, id string, query url.Values) *websocket.Conn {
	t.Helper()
	conn, _, err := dial(t, s, endpoint, id, query, nil)
	require.NoError(t, err)
	return conn
}

// readFrame reads one JSON frame within waitTimeout.
func readFrame(t *testing.T, conn *websocket.Conn) map[string]any {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(waitTimeout)))
	_, data, err := conn.ReadMessage()
	require.NoError(t, err)
	var frame map[string]any
	require.NoError(t, json.Unmarshal(data, &frame), "frame %s", data)
	return frame
}

// readFrames reads n JSON frames.
func readFrames(t *testing.T, conn *websocket.Conn, n int) []map[string]any {
	t.Helper()
	out := make([]map[string]any, 0, n)
	for range n {
		out = append(out, readFrame(t, conn))
	}
	return out
}

// readRaw reads one frame's bytes.
func readRaw(t *testing.T, conn *websocket.Conn) []byte {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(waitTimeout)))
	_, data, err := conn.ReadMessage()
	require.NoError(t, err)
	return data
}

// expectClose reads until the connection ends and returns the close error.
func expectClose(t *testing.T, conn *websocket.Conn) *websocket.CloseError {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(waitTimeout)))
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		var closeErr *websocket.CloseError
		require.True(t, errors.As(err, &closeErr), "expected a close frame, got %v", err)
		return closeErr
	}
}

func sendJSON(t *testing.T, conn *websocket.Conn, v any) {
	t.Helper()
	require.NoError(t, conn.SetWriteDeadline(time.Now().Add(waitTimeout)))
	require.NoError(t, conn.WriteJSON(v))
}

func sendAuth(t *testing.T, conn *websocket.Conn, key string) {
	t.Helper()
	sendJSON(t, conn, map[string]any{"type": "auth", "session_api_key": key})
}

// apiClient speaks REST to the stub with an optional session key.
type apiClient struct {
	t      *testing.T
	base   string
	key    string
	client *http.Client
}

func newAPIClient(t *testing.T, s *Server, key string) *apiClient {
	client := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	return &apiClient{t: t, base: s.URL(), key: key, client: client}
}

// do sends a request and returns status and body.
func (a *apiClient) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var reader io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(a.t, err)
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, a.base+path, reader)
	require.NoError(a.t, err)
	if a.key != "" {
		req.Header.Set("X-Session-API-Key", a.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return resp.StatusCode, raw
}

// getJSON GETs path expecting 200 and decodes the body.
func (a *apiClient) getJSON(path string) map[string]any {
	a.t.Helper()
	status, body := a.do(http.MethodGet, path, nil)
	require.Equal(a.t, http.StatusOK, status, "GET %s: %s", path, body)
	var out map[string]any
	require.NoError(a.t, json.Unmarshal(body, &out))
	return out
}

// newConversation creates a conversation or fails the test.
func newConversation(t *testing.T, s *Server, opts ConversationOptions) *Conversation {
	t.Helper()
	c, err := s.CreateConversation(opts)
	require.NoError(t, err)
	return c
}

// appendAll appends events or fails the test, returning them as stored.
func appendAll(t *testing.T, c *Conversation, events ...Event) []Event {
	t.Helper()
	out := make([]Event, 0, len(events))
	for _, ev := range events {
		stored, err := c.Append(ev)
		require.NoError(t, err)
		out = append(out, stored)
	}
	return out
}

// steppingClock returns a clock that advances by step on every call.
func steppingClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

// ids extracts `id` (or the nested event's id) from frames.
func ids(frames []map[string]any) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		if ev, ok := f["event"].(map[string]any); ok {
			f = ev
		}
		out[i], _ = f["id"].(string)
	}
	return out
}

func eventIDs(events []Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.ID()
	}
	return out
}

func isFullState(frame map[string]any) bool {
	return frame["kind"] == KindConversationStateUpdateEvent && frame["key"] == fullStateKey
}
