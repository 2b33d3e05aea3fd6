package openhandstest

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// firstFrameIsGreeting checks the frame a freshly accepted socket sends
// first: full_state on the legacy socket, sync on the session socket.
func firstFrameIsGreeting(t *testing.T, endpoint Endpoint, frame map[string]any) {
	t.Helper()
	if endpoint == EndpointEvents {
		assert.True(t, isFullState(frame), "first frame %v", frame)
		return
	}
	assert.Equal(t, "sync", frame["type"], "first frame %v", frame)
}

func TestSocketAuth(t *testing.T) {
	type outcome int
	const (
		accepted outcome = iota
		closed4001
		handshakeRejected
	)
	tests := []struct {
		name        string
		keys        []string
		query       url.Values
		header      http.Header
		firstFrame  any    // sent right after connecting; nil = nothing
		rawFrame    string // sent verbatim when set
		authTimeout time.Duration
		want        outcome
	}{
		{name: "no keys configured", want: accepted},
		{name: "first frame ok", keys: []string{"other", testKey},
			firstFrame: map[string]any{"type": "auth", "session_api_key": testKey}, want: accepted},
		{name: "first frame wrong key", keys: []string{testKey},
			firstFrame: map[string]any{"type": "auth", "session_api_key": "nope"}, want: closed4001},
		{name: "first frame wrong type", keys: []string{testKey},
			firstFrame: map[string]any{"type": "hello", "session_api_key": testKey}, want: closed4001},
		{name: "first frame not an object", keys: []string{testKey}, firstFrame: []any{"auth"}, want: closed4001},
		{name: "first frame bad JSON", keys: []string{testKey}, rawFrame: "{auth", want: closed4001},
		{name: "first frame timeout", keys: []string{testKey}, authTimeout: 150 * time.Millisecond, want: closed4001},
		{name: "query key ok", keys: []string{testKey}, query: url.Values{"session_api_key": {testKey}}, want: accepted},
		{name: "query key wrong", keys: []string{testKey}, query: url.Values{"session_api_key": {"nope"}}, want: handshakeRejected},
		{name: "header key ok", keys: []string{testKey}, header: http.Header{"X-Session-Api-Key": {testKey}}, want: accepted},
		{name: "header key wrong", keys: []string{testKey}, header: http.Header{"X-Session-Api-Key": {"nope"}}, want: handshakeRejected},
		{name: "query wins over header", keys: []string{testKey}, query: url.Values{"session_api_key": {"nope"}},
			header: http.Header{"X-Session-Api-Key": {testKey}}, want: handshakeRejected},
	}
	for _, endpoint := range []Endpoint{EndpointEvents, EndpointSession} {
		for _, tt := range tests {
			t.Run(string(endpoint)+"/"+tt.name, func(t *testing.T) {
				s := Start(t, Config{SessionAPIKeys: tt.keys, AuthTimeout: tt.authTimeout})
				c := newConversation(t, s, ConversationOptions{})
				conn, resp, err := dial(t, s, endpoint, c.ID(), tt.query, tt.header)
				if tt.want == handshakeRejected {
					require.Error(t, err)
					require.NotNil(t, resp)
					assert.Equal(t, http.StatusForbidden, resp.StatusCode)
					return
				}
				require.NoError(t, err)
				switch {
				case tt.rawFrame != "":
					require.NoError(t, conn.WriteMessage(websocket.TextMessage, []byte(tt.rawFrame)))
				case tt.firstFrame != nil:
					sendJSON(t, conn, tt.firstFrame)
				}
				if tt.want == closed4001 {
					closeErr := expectClose(t, conn)
					assert.Equal(t, 4001, closeErr.Code)
					assert.Equal(t, "Authentication failed", closeErr.Text)
					return
				}
				firstFrameIsGreeting(t, endpoint, readFrame(t, conn))
			})
		}
	}
}

func TestSocketUnknownConversation(t *testing.T) {
	for _, endpoint := range []Endpoint{EndpointEvents, EndpointSession} {
		t.Run(string(endpoint), func(t *testing.T) {
			s := Start(t, Config{SessionAPIKeys: []string{testKey}})
			conn := mustDial(t, s, endpoint, NewUUID(), nil)
			sendAuth(t, conn, testKey)
			closeErr := expectClose(t, conn)
			assert.Equal(t, 4004, closeErr.Code)
			assert.Equal(t, "Conversation not found", closeErr.Text)
		})
	}
}

func TestLegacySocketFullStateFirst(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{Status: StatusFinished, Title: "demo"})
	stored := appendAll(t, c, MessageEvent("user", "hi"), MessageEvent("agent", "hello"))

	var snapshotIDs []string
	for range 2 {
		conn := mustDial(t, s, EndpointEvents, c.ID(), url.Values{"resend_mode": {"all"}})
		frames := readFrames(t, conn, 3)
		require.True(t, isFullState(frames[0]), "first frame %v", frames[0])
		value := frames[0]["value"].(map[string]any)
		assert.Equal(t, StatusFinished, value["execution_status"])
		assert.Equal(t, c.ID(), value["id"])
		assert.Equal(t, stored[1].ID(), value["leaf_event_id"])
		assert.NotContains(t, frames[0], "parent_id", "snapshots bypass tree stamping")
		assert.Equal(t, eventIDs(stored), ids(frames[1:]))
		snapshotIDs = append(snapshotIDs, frames[0]["id"].(string))
	}
	assert.NotEqual(t, snapshotIDs[0], snapshotIDs[1], "each snapshot is a new event")

	page := newAPIClient(t, s, "").getJSON("/api/conversations/" + c.ID() + "/events/search")
	assert.Len(t, page["items"], 2, "snapshots are never persisted")
}

func TestLegacySocketResend(t *testing.T) {
	// Pinned timestamps: two with microseconds, two on whole seconds, where
	// Python's isoformat() prints no fraction at all.
	timestamps := []string{
		"2026-08-22T14:03:11.402137",
		"2026-08-22T14:03:12",
		"2026-08-22T14:03:12.000001",
		"2026-08-22T14:03:13",
	}
	paris := time.FixedZone("CEST", 2*60*60)
	tests := []struct {
		name     string
		location *time.Location
		query    url.Values
		want     []int // indexes into timestamps
	}{
		{name: "live only", query: nil, want: nil},
		{name: "all", query: url.Values{"resend_mode": {"all"}}, want: []int{0, 1, 2, 3}},
		{name: "deprecated resend_all", query: url.Values{"resend_all": {"true"}}, want: []int{0, 1, 2, 3}},
		{name: "since with microseconds is inclusive", query: url.Values{"resend_mode": {"since"},
			"after_timestamp": {"2026-08-22T14:03:11.402137"}}, want: []int{0, 1, 2, 3}},
		{name: "since between events", query: url.Values{"resend_mode": {"since"},
			"after_timestamp": {"2026-08-22T14:03:11.500000"}}, want: []int{1, 2, 3}},
		{name: "since whole second matches the fractionless timestamp", query: url.Values{"resend_mode": {"since"},
			"after_timestamp": {"2026-08-22T14:03:12"}}, want: []int{1, 2, 3}},
		{name: "since zero fraction normalises like isoformat", query: url.Values{"resend_mode": {"since"},
			"after_timestamp": {"2026-08-22T14:03:12.000000"}}, want: []int{1, 2, 3}},
		{name: "since aware UTC", query: url.Values{"resend_mode": {"since"},
			"after_timestamp": {"2026-08-22T14:03:13Z"}}, want: []int{3}},
		{name: "since aware offset converted to server time", location: paris, query: url.Values{"resend_mode": {"since"},
			"after_timestamp": {"2026-08-22T14:03:13+00:00"}}, want: []int{3}},
		{name: "since without after_timestamp resends nothing", query: url.Values{"resend_mode": {"since"}}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, Config{Location: tt.location})
			c := newConversation(t, s, ConversationOptions{})
			var stored []Event
			for _, ts := range timestamps {
				ev := MessageEvent("agent", ts)
				if tt.location == paris {
					ev["timestamp"] = "2026-08-22T16" + ts[13:] // the same instants, Paris local time
				} else {
					ev["timestamp"] = ts
				}
				stored = append(stored, appendAll(t, c, ev)...)
			}
			conn := mustDial(t, s, EndpointEvents, c.ID(), tt.query)
			require.True(t, isFullState(readFrame(t, conn)))
			var want []string
			for _, i := range tt.want {
				want = append(want, stored[i].ID())
			}
			got := ids(readFrames(t, conn, len(want)))
			if len(want) == 0 {
				got = nil
			}
			assert.Equal(t, want, got)

			// Nothing else was resent: the next frame is a live one.
			require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 1))
			live := appendAll(t, c, MessageEvent("agent", "live"))
			assert.Equal(t, live[0].ID(), readFrame(t, conn)["id"])
		})
	}
}

func TestLegacySocketInterleavedReplay(t *testing.T) {
	tests := []struct {
		name  string
		after int
		// want lists the frames after full_state: "e<i>" a history event,
		// "x" the interleaved one.
		want []string
	}{
		{name: "before the log is read: live then duplicated by the replay", after: 0,
			want: []string{"x", "e0", "e1", "e2", "e3", "x"}},
		{name: "in the middle of a page", after: 2, want: []string{"e0", "e1", "x", "e2", "e3"}},
		{name: "past the end", after: 10, want: []string{"e0", "e1", "e2", "e3", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, Config{})
			c := newConversation(t, s, ConversationOptions{})
			history := appendAll(t, c, MessageEvent("user", "0"), MessageEvent("agent", "1"),
				MessageEvent("agent", "2"), MessageEvent("agent", "3"))
			interleaved := MessageEvent("agent", "x")
			interleaved["id"] = NewUUID()
			c.InterleaveNextReplay(tt.after, interleaved)

			conn := mustDial(t, s, EndpointEvents, c.ID(), url.Values{"resend_mode": {"all"}})
			require.True(t, isFullState(readFrame(t, conn)))
			names := map[string]string{interleaved.ID(): "x"}
			for i, ev := range history {
				names[ev.ID()] = "e" + string(rune('0'+i))
			}
			var got []string
			for _, id := range ids(readFrames(t, conn, len(tt.want))) {
				got = append(got, names[id])
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLegacySocketInbound(t *testing.T) {
	tests := []struct {
		name     string
		frame    string
		wantCode string // ServerErrorEvent code; "" = accepted as a user message
	}{
		{name: "bare string content", frame: `{"role":"user","content":"hi"}`},
		{name: "content list", frame: `{"role":"user","content":[{"type":"text","text":"hi"}]}`},
		{name: "not JSON", frame: `hello`, wantCode: "JSONDecodeError"},
		{name: "missing role", frame: `{"content":"hi"}`, wantCode: "ValidationError"},
		{name: "bad content item", frame: `{"role":"user","content":[{"type":"video"}]}`, wantCode: "ValidationError"},
		{name: "assistant role", frame: `{"role":"assistant","content":"hi"}`, wantCode: "AssertionError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, Config{SessionAPIKeys: []string{testKey}})
			c := newConversation(t, s, ConversationOptions{})
			conn := mustDial(t, s, EndpointEvents, c.ID(), nil)
			sendAuth(t, conn, testKey)
			require.True(t, isFullState(readFrame(t, conn)))
			sendAuth(t, conn, testKey) // a redundant auth frame is ignored
			require.NoError(t, conn.WriteMessage(websocket.TextMessage, []byte(tt.frame)))

			if tt.wantCode != "" {
				frame := readFrame(t, conn)
				assert.Equal(t, KindServerErrorEvent, frame["kind"])
				assert.Equal(t, "environment", frame["source"])
				assert.Equal(t, tt.wantCode, frame["code"])
				assert.NotEmpty(t, frame["detail"])
				assert.Empty(t, c.Events(), "a rejected frame changes nothing")
				return
			}
			frames := readFrames(t, conn, 3)
			assert.Equal(t, KindMessageEvent, frames[0]["kind"])
			assert.Equal(t, "user", frames[0]["source"])
			llm := frames[0]["llm_message"].(map[string]any)
			assert.Equal(t, []any{map[string]any{"type": "text", "text": "hi", "cache_prompt": false}}, llm["content"])
			assert.Equal(t, "last_user_message_id", frames[1]["key"])
			assert.Equal(t, frames[0]["id"], frames[1]["value"])
			assert.Equal(t, "execution_status", frames[2]["key"])
			assert.Equal(t, StatusRunning, frames[2]["value"], "inbound messages always run")
			assert.Equal(t, StatusRunning, c.Status())

			recorded := s.InboundFrames()
			require.Len(t, recorded, 3)
			assert.True(t, recorded[0].IsAuth())
			assert.True(t, recorded[1].IsAuth())
			assert.False(t, recorded[2].IsAuth())
			assert.Equal(t, tt.frame, string(recorded[2].Data))
			assert.Equal(t, c.ID(), recorded[2].ConversationID)
			assert.Equal(t, EndpointEvents, recorded[2].Endpoint)
		})
	}
}

func TestSocketRefusals(t *testing.T) {
	t.Run("subscriber limit counts the internal subscriber", func(t *testing.T) {
		s := Start(t, Config{MaxSubscribers: 3})
		c := newConversation(t, s, ConversationOptions{})
		for range 2 {
			conn := mustDial(t, s, EndpointEvents, c.ID(), nil)
			require.True(t, isFullState(readFrame(t, conn)))
		}
		for _, endpoint := range []Endpoint{EndpointEvents, EndpointSession} {
			closeErr := expectClose(t, mustDial(t, s, endpoint, c.ID(), nil))
			assert.Equal(t, 1013, closeErr.Code)
			assert.Equal(t, "Too many connections for this conversation", closeErr.Text)
		}
	})
	t.Run("scripted refusal", func(t *testing.T) {
		s := Start(t, Config{})
		c := newConversation(t, s, ConversationOptions{})
		c.RefuseSockets(1, "credential_binding_activation_required")
		closeErr := expectClose(t, mustDial(t, s, EndpointEvents, c.ID(), nil))
		assert.Equal(t, 1013, closeErr.Code)
		assert.Equal(t, "credential_binding_activation_required", closeErr.Text)
		require.True(t, isFullState(readFrame(t, mustDial(t, s, EndpointEvents, c.ID(), nil))), "only one refusal")
	})
	t.Run("refusal window", func(t *testing.T) {
		s := Start(t, Config{})
		c := newConversation(t, s, ConversationOptions{})
		c.RefuseSocketsFor(time.Hour, "")
		closeErr := expectClose(t, mustDial(t, s, EndpointSession, c.ID(), nil))
		assert.Equal(t, 1013, closeErr.Code)
		c.RefuseSocketsFor(0, "")
		assert.Equal(t, "sync", readFrame(t, mustDial(t, s, EndpointSession, c.ID(), nil))["type"])
	})
}

func TestSlowConsumerIsDropped(t *testing.T) {
	s := Start(t, Config{MaxQueuedFrames: 8})
	c := newConversation(t, s, ConversationOptions{})
	conn := mustDial(t, s, EndpointEvents, c.ID(), nil)
	require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 1))

	// The client reads nothing while more is sent than the kernel buffers
	// hold (injected frames skip the JSON work, which is slow under -race);
	// scripting calls must still return promptly.
	frame := OversizeFrame(64 << 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 400 {
			c.InjectFrame(EndpointEvents, frame)
		}
		_, _ = c.Append(MessageEvent("agent", "after the overflow"))
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("scripting blocked on a slow client")
	}
	closeErr := expectClose(t, conn)
	assert.Equal(t, 1013, closeErr.Code)
	assert.Equal(t, "slow_consumer", closeErr.Text)
}

func TestCloseAndDropSockets(t *testing.T) {
	t.Run("close with code after queued frames", func(t *testing.T) {
		s := Start(t, Config{})
		c := newConversation(t, s, ConversationOptions{})
		conn := mustDial(t, s, EndpointEvents, c.ID(), nil)
		require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 1))
		stored := appendAll(t, c, MessageEvent("agent", "last words"))
		c.CloseSockets(1011, "internal error")
		require.True(t, isFullState(readFrame(t, conn)))
		assert.Equal(t, stored[0].ID(), readFrame(t, conn)["id"])
		closeErr := expectClose(t, conn)
		assert.Equal(t, 1011, closeErr.Code)
		assert.Equal(t, "internal error", closeErr.Text)
	})
	t.Run("drop without close frame", func(t *testing.T) {
		s := Start(t, Config{})
		c := newConversation(t, s, ConversationOptions{})
		conn := mustDial(t, s, EndpointSession, c.ID(), nil)
		require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 1))
		c.DropSockets()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(waitTimeout)))
		for {
			_, _, err := conn.ReadMessage()
			if err == nil {
				continue
			}
			assert.True(t, websocket.IsUnexpectedCloseError(err), "abrupt close, got %v", err)
			break
		}
		require.Eventually(t, func() bool { return c.Sockets() == 0 }, waitTimeout, 10*time.Millisecond)
	})
}

func TestInjectFrame(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
	}{
		{name: "bad JSON", frame: BadJSONFrame()},
		{name: "unknown kind", frame: UnknownKindFrame()},
		{name: "missing fields", frame: MissingFieldsFrame()},
		{name: "oversize", frame: OversizeFrame(2 << 20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, Config{})
			c := newConversation(t, s, ConversationOptions{})
			legacy := mustDial(t, s, EndpointEvents, c.ID(), nil)
			session := mustDial(t, s, EndpointSession, c.ID(), nil)
			require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 2))
			require.True(t, isFullState(readFrame(t, legacy)))

			assert.Equal(t, 1, c.InjectFrame(EndpointEvents, tt.frame))
			assert.Equal(t, tt.frame, readRaw(t, legacy))
			assert.Equal(t, 2, c.InjectFrame("", tt.frame))
			assert.Equal(t, tt.frame, readRaw(t, legacy))
			readFrames(t, session, 2) // sync, transient full_state
			assert.Equal(t, tt.frame, readRaw(t, session))
			assert.Empty(t, c.Events(), "injected frames bypass the log")
		})
	}
	assert.GreaterOrEqual(t, len(OversizeFrame(1000)), 1000)
}

func TestLegacyTransportDump(t *testing.T) {
	for _, dump := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1.37+ keeps parent_id", true: "v1.36 strips parent_id"}[dump], func(t *testing.T) {
			s := Start(t, Config{LegacyTransportDump: dump})
			c := newConversation(t, s, ConversationOptions{})
			tools := Event{"kind": KindSystemPromptEvent, "source": "agent",
				"system_prompt": map[string]any{"type": "text", "text": "sys", "cache_prompt": false},
				"tools":         []any{map[string]any{"kind": "TerminalTool"}, map[string]any{"kind": "BrowserToolSet"}}}
			stored := appendAll(t, c, tools, MessageEvent("user", "hi"))
			assert.Equal(t, stored[0].ID(), stored[1].ParentID(), "stored events always carry parent_id")

			legacy := mustDial(t, s, EndpointEvents, c.ID(), url.Values{"resend_mode": {"all"}})
			frames := readFrames(t, legacy, 3)[1:]
			page := newAPIClient(t, s, "").getJSON("/api/conversations/" + c.ID() + "/events/search")
			items := page["items"].([]any)
			for i, frame := range frames {
				item := items[i].(map[string]any)
				if i == 1 {
					_, hasParent := frame["parent_id"]
					assert.Equal(t, !dump, hasParent, "socket frame")
					_, hasParent = item["parent_id"]
					assert.Equal(t, !dump, hasParent, "search item")
				}
			}
			wantTools := 2
			if dump {
				wantTools = 1
			}
			assert.Len(t, frames[0]["tools"], wantTools)

			session := mustDial(t, s, EndpointSession, c.ID(), url.Values{"after_seq": {"-1"}})
			durable := readFrames(t, session, 3)[2]["event"].(map[string]any)
			assert.Equal(t, stored[0].ID(), durable["parent_id"], "the session socket postdates the transport dump")
		})
	}
}
