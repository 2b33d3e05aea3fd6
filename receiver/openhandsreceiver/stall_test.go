package openhandsreceiver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// TestStalledSocketIsRedialled: a socket whose TCP stays open but that
// forwards nothing (a stuck proxy, a NAT that forgot the flow), or that
// trickles a frame announced at a megabyte, used to hang its conversation
// for good. Each is cut, counted and redialled, and every event is
// delivered: by the keepalive (no pong), the frame deadline, or because
// search shows the conversation moving past what the socket delivered.
func TestStalledSocketIsRedialled(t *testing.T) {
	const never = time.Hour
	for _, tc := range []struct {
		name, cause string
		sockets     socketSettings
		stall       func(conv *oh.Conversation, socket string)
	}{
		{
			name: "no pong", cause: "keepalive",
			sockets: socketSettings{pingInterval: 50 * time.Millisecond, pongWait: time.Second,
				frameGrace: never, minFrameRate: minFrameRate, behindSearch: never},
			stall: func(conv *oh.Conversation, _ string) { conv.StallSockets() },
		},
		{
			name: "trickled frame", cause: "frame",
			sockets: socketSettings{pingInterval: never, pongWait: never,
				frameGrace: 300 * time.Millisecond, minFrameRate: minFrameRate, behindSearch: never},
			stall: func(conv *oh.Conversation, socket string) {
				conv.TrickleFrame(endpointOf(socket), oh.OversizeFrame(1<<20), 10*time.Millisecond)
			},
		},
		{
			name: "behind search", cause: "behind_search",
			sockets: socketSettings{pingInterval: never, pongWait: never,
				frameGrace: never, minFrameRate: minFrameRate, behindSearch: 300 * time.Millisecond},
			stall: func(conv *oh.Conversation, _ string) { conv.StallSockets() },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothSockets(t, func(t *testing.T, socket string) {
				stub := startStub(t)
				conv := createConversation(t, stub)
				h := startHarnessSockets(t, fastConfig(socket, stub), nil, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), tc.sockets)
				h.waitLive(conv, 1)
				mustStatus(t, conv, oh.StatusRunning)
				h.waitTypes(conv.ID(), "run.started", "state.delta")

				tc.stall(conv, socket)
				var later []oh.Event
				for range 10 {
					later = append(later, mustAppend(t, conv, oh.MessageEvent("agent", "after the stall")))
				}
				mustStatus(t, conv, oh.StatusFinished)
				got := h.waitTypes(conv.ID(), "state.delta", "run.finished")

				delivered := map[string]bool{}
				for _, ev := range got {
					if id, ok := ev.Data["vendor_event_id"].(string); ok {
						delivered[id] = true
					}
				}
				for _, ev := range later {
					assert.True(t, delivered[ev.ID()], "event %s after the stall is delivered", ev.ID())
				}
				assert.GreaterOrEqual(t, h.metric("otelcol_openhands_socket_stalls", "cause", tc.cause), int64(1))
				require.Eventually(t, func() bool {
					return h.metric("otelcol_openhands_conversations_attached", "", "") == 1
				}, waitFor, tick, "conversations_attached counts the redialled socket once")
				h.validate()
			})
		})
	}
}

// TestKeepaliveSparesAnIdleSocket: an idle socket whose server answers
// pings is never cut, however long nothing else arrives.
func TestKeepaliveSparesAnIdleSocket(t *testing.T) {
	stub := startStub(t)
	conv := createConversation(t, stub)
	sockets := defaultSocketSettings
	sockets.pingInterval, sockets.pongWait = 50*time.Millisecond, time.Second
	h := startHarnessSockets(t, fastConfig(socketSession, stub), nil, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), sockets)
	h.waitLive(conv, 1)
	time.Sleep(4 * (sockets.pingInterval + sockets.pongWait)) // idle, pinged all along
	assert.Zero(t, h.metric("otelcol_openhands_socket_stalls", "", ""))
	assert.Zero(t, h.metric("otelcol_openhands_reconnects", "", ""))
	assert.Equal(t, 1, conv.Sockets())
}

// TestBehindSearchRecyclesOncePerView: a socket search shows behind is
// recycled once for that view of search; if the server changed a status
// without telling any socket, the redialled one is not cut again and again.
func TestBehindSearchRecyclesOncePerView(t *testing.T) {
	c := offlineConversation(t, "behind")
	c.api.sockets.behindSearch = time.Minute
	c.handleEvent(context.Background(), historyEvent(0, 0), legacyHistory, false) // running
	require.Equal(t, oh.StatusRunning, c.session.mapper.Status())

	cuts := 0
	dial := func() {
		conn := dialEcho(t)
		c.socket.Store(&socketCut{conn: conn})
		t.Cleanup(func() { conn.Close() })
	}
	poll := func(info conversationInfo, at time.Time) {
		c.noteSearch(info, at)
		c.info = info
		if s := c.socket.Load(); s != nil && s.reason() != nil {
			assert.ErrorIs(t, s.reason(), errBehindSearch)
			cuts++
			dial()
		}
	}
	dial()
	start := time.Now()
	stuck := conversationInfo{ID: "behind", ExecutionStatus: oh.StatusError, UpdatedAt: "2026-12-02T01:00:00Z"}
	for i := range 10 { // ten minutes of search showing a status no socket delivers
		poll(stuck, start.Add(time.Duration(i)*time.Minute))
	}
	assert.Equal(t, 1, cuts, "one view of search, one recycle")

	moved := stuck
	moved.UpdatedAt = "2026-12-02T01:10:00Z"
	for i := range 3 {
		poll(moved, start.Add(time.Duration(10+i)*time.Minute))
	}
	assert.Equal(t, 2, cuts, "search moved again, and the socket still delivered nothing")
}

// dialEcho opens a WebSocket to a server that reads until the client goes.
func dialEcho(t *testing.T) *websocket.Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	resp.Body.Close()
	return conn
}

// TestSlowFrameIsNotCut: a large frame arriving slowly, but faster than
// minFrameRate, is read whole, its deadline moving with its bytes, past
// frameGrace and past the keepalive window; a pong the server sends
// between its fragments does not put the keepalive's shorter deadline on
// the message.
func TestSlowFrameIsNotCut(t *testing.T) {
	const (
		chunks    = 3
		chunk     = 80 << 10 // more than deadlineStep: each moves the deadline
		chunkWait = 1200 * time.Millisecond
	)
	settings := socketSettings{pingInterval: 500 * time.Millisecond, pongWait: 500 * time.Millisecond,
		frameGrace: time.Second, minFrameRate: 32 << 10, behindSearch: time.Hour}
	require.Greater(t, time.Duration(chunks-1)*chunkWait, settings.frameGrace)
	require.Greater(t, chunkWait, settings.pingInterval+settings.pongWait)
	server := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(rw, req, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		w, err := conn.NextWriter(websocket.TextMessage)
		if err != nil {
			return
		}
		for i := range chunks {
			if i > 0 {
				time.Sleep(chunkWait)
			}
			if _, err := w.Write([]byte(strings.Repeat("x", chunk))); err != nil {
				return
			}
			if err := conn.WriteControl(websocket.PongMessage, nil, time.Now().Add(time.Second)); err != nil {
				return
			}
		}
		_ = w.Close()
		_, _, _ = conn.ReadMessage() // until the client goes
	}))
	defer server.Close()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(server.URL, "http"), nil)
	require.NoError(t, err)
	resp.Body.Close()
	defer conn.Close()

	data, err := newFrameReader(conn, 1<<20, settings).read(nil)
	require.NoError(t, err)
	assert.Len(t, data, chunks*chunk)
}
