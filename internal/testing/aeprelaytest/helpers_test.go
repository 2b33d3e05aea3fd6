package aeprelaytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitBound bounds every read a test makes.
const waitBound = 5 * time.Second

const testTime = "2026-07-03T10:00:00Z"

// event returns a minimal valid session-scoped Event of agent "alpha".
func event(typ, session string, epoch, seq int) string {
	return fmt.Sprintf(`{"aep":"0.1","id":"ev-%s-%d-%d-%s","type":%q,"time":%q,"source":"aep://host/agent/alpha/session/%s","agent":"alpha","session":%q,"seq":%d,"epoch":%d}`,
		session, epoch, seq, typ, typ, testTime, session, session, seq, epoch)
}

func sourceOf(session string) string { return "aep://host/agent/alpha/session/" + session }

// command returns a command from the sender "mission-control".
func command(typ, id, session string) string {
	return fmt.Sprintf(`{"aep":"0.1","id":%q,"type":%q,"time":%q,"source":"aep://ops/agent/mission-control","agent":"mission-control","session":%q,"capture":"metadata"}`,
		id, typ, testTime, session)
}

// post sends body to /events with AEP-Version 0.1 and the relay's token
// unless the header set overrides them.
func post(t *testing.T, r *Relay, contentType, body string, headers map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.URL()+"/events", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("AEP-Version", "0.1")
	req.Header.Set("Content-Type", contentType)
	if r.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.Token)
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	client := &http.Client{Timeout: waitBound, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body map[string]any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &body), "body %s", raw)
	}
	return resp.StatusCode, body
}

func get(t *testing.T, r *Relay, path string, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.URL()+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, req)
}

// client is a test socket party.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, r *Relay) *client {
	t.Helper()
	url := r.SocketURL()
	if r.cfg.Token != "" {
		url += "?access_token=" + r.cfg.Token
	}
	ws, resp, err := (&websocket.Dialer{HandshakeTimeout: waitBound}).Dial(url, nil)
	require.NoError(t, err)
	resp.Body.Close()
	c := &client{t: t, ws: ws}
	t.Cleanup(func() { _ = ws.Close() })
	return c
}

// with returns the client reporting to t, for use inside a subtest.
func (c *client) with(t *testing.T) *client { return &client{t: t, ws: c.ws} }

func (c *client) send(frame string) {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetWriteDeadline(time.Now().Add(waitBound)))
	require.NoError(c.t, c.ws.WriteMessage(websocket.TextMessage, []byte(frame)))
}

// read returns the next text frame.
func (c *client) read() []byte {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(waitBound)))
	kind, data, err := c.ws.ReadMessage()
	require.NoError(c.t, err)
	require.Equal(c.t, websocket.TextMessage, kind)
	return data
}

func (c *client) readJSON() map[string]any {
	c.t.Helper()
	var m map[string]any
	data := c.read()
	require.NoError(c.t, json.Unmarshal(data, &m), "frame %s", data)
	return m
}

// readClose reads until the connection ends and returns its error.
func (c *client) readClose() error {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(waitBound)))
	for {
		if _, _, err := c.ws.ReadMessage(); err != nil {
			return err
		}
	}
}

// expectSilence asserts that no frame arrives for d. The timeout spoils
// the connection for reading: call it last.
func (c *client) expectSilence(d time.Duration) {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(d)))
	_, data, err := c.ws.ReadMessage()
	require.Error(c.t, err, "unexpected frame %s", data)
	var ne interface{ Timeout() bool }
	require.ErrorAs(c.t, err, &ne)
	require.True(c.t, ne.Timeout(), "want a read timeout, got %v", err)
}

// greet sends a hello and checks the relay's reply.
func (c *client) greet(hello string) {
	c.t.Helper()
	c.send(hello)
	reply := c.readJSON()
	require.Equal(c.t, "hello", reply["type"])
	require.Equal(c.t, []any{"0.1"}, reply["versions"])
}

func emitterHello(agent string, accepts ...string) string {
	raw, _ := json.Marshal(map[string]any{
		"type": "hello", "versions": []string{"0.1"}, "role": "emitter",
		"identity":     map[string]string{"agent": agent, "instance": "test/1"},
		"capabilities": map[string]any{"control": map[string]any{"accepts": append([]string{}, accepts...), "ack_window_ms": 10000}},
	})
	return string(raw)
}

const consumerHello = `{"type":"hello","versions":["0.1"],"role":"consumer"}`

// sse is a test SSE consumer.
type sse struct {
	t      *testing.T
	cancel context.CancelFunc
	body   io.ReadCloser
	lines  *bufio.Reader
}

// sseMsg is one SSE message or comment.
type sseMsg struct {
	comment string
	event   string
	id      string
	data    string
}

func openStream(t *testing.T, r *Relay, query string, headers map[string]string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/stream?"+query, nil)
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	s := &sse{t: t, cancel: cancel, body: resp.Body, lines: bufio.NewReader(resp.Body)}
	t.Cleanup(s.close)
	return s
}

func (s *sse) close() {
	s.cancel()
	_ = s.body.Close()
}

// next returns the next message, failing after waitBound.
func (s *sse) next() sseMsg {
	s.t.Helper()
	type result struct {
		m   sseMsg
		err error
	}
	done := make(chan result, 1)
	go func() {
		var m sseMsg
		for {
			line, err := s.lines.ReadString('\n')
			if err != nil {
				done <- result{err: err}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if m != (sseMsg{}) {
					done <- result{m: m}
					return
				}
			case strings.HasPrefix(line, ": "):
				m.comment = strings.TrimPrefix(line, ": ")
			case strings.HasPrefix(line, "event: "):
				m.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				m.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				m.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	select {
	case res := <-done:
		require.NoError(s.t, res.err)
		return res.m
	case <-time.After(waitBound):
		s.close()
		<-done
		s.t.Fatal("no SSE message within the bound")
		return sseMsg{}
	}
}

// nextEvent skips heartbeat comments.
func (s *sse) nextEvent() sseMsg {
	s.t.Helper()
	for {
		if m := s.next(); m.comment != "ping" {
			return m
		}
	}
}
