package openhandstest

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frameTag summarises a session frame as "sync", "durable:<seq>",
// "transient:<kind>", or its type.
func frameTag(frame map[string]any) string {
	switch frame["type"] {
	case "durable":
		return "durable:" + jsonNumberString(frame["seq"])
	case "transient":
		ev := frame["event"].(map[string]any)
		if key, _ := ev["key"].(string); key != "" {
			return "transient:" + key
		}
		return "transient:" + ev["kind"].(string)
	default:
		return frame["type"].(string)
	}
}

func jsonNumberString(v any) string {
	f, _ := v.(float64)
	return strconv.Itoa(int(f))
}

func TestSessionSocketOrder(t *testing.T) {
	tests := []struct {
		name     string
		query    url.Values
		wantSync map[string]any
		want     []string
	}{
		{name: "live only", query: nil,
			wantSync: map[string]any{"type": "sync", "through_seq": 2.0},
			want:     []string{"transient:full_state"}},
		{name: "full history", query: url.Values{"after_seq": {"-1"}},
			wantSync: map[string]any{"type": "sync", "from_seq": -1.0, "through_seq": 2.0},
			want:     []string{"durable:0", "durable:1", "durable:2", "transient:full_state"}},
		{name: "after a seq", query: url.Values{"after_seq": {"1"}},
			wantSync: map[string]any{"type": "sync", "from_seq": 1.0, "through_seq": 2.0},
			want:     []string{"durable:2", "transient:full_state"}},
		{name: "after the end", query: url.Values{"after_seq": {"7"}},
			wantSync: map[string]any{"type": "sync", "from_seq": 7.0, "through_seq": 2.0},
			want:     []string{"transient:full_state"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, Config{})
			c := newConversation(t, s, ConversationOptions{})
			history := appendAll(t, c, MessageEvent("user", "hi"), TerminalAction("ls"))
			_, err := c.SetStatus(StatusRunning)
			require.NoError(t, err)

			conn := mustDial(t, s, EndpointSession, c.ID(), tt.query)
			assert.Equal(t, tt.wantSync, readFrame(t, conn))
			frames := readFrames(t, conn, len(tt.want))
			var got []string
			for _, f := range frames {
				got = append(got, frameTag(f))
			}
			assert.Equal(t, tt.want, got)
			for _, f := range frames {
				if f["type"] == "durable" && f["seq"] == 0.0 {
					assert.Equal(t, history[0].ID(), f["event"].(map[string]any)["id"])
				}
			}

			require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 1))
			appendAll(t, c, MessageEvent("agent", "live"))
			assert.Equal(t, "durable:3", frameTag(readFrame(t, conn)), "live events are durable with their log index")
		})
	}
	t.Run("empty log", func(t *testing.T) {
		s := Start(t, Config{})
		c := newConversation(t, s, ConversationOptions{})
		conn := mustDial(t, s, EndpointSession, c.ID(), url.Values{"after_seq": {"-1"}})
		assert.Equal(t, map[string]any{"type": "sync", "from_seq": -1.0}, readFrame(t, conn), "no through_seq")
		assert.Equal(t, "transient:full_state", frameTag(readFrame(t, conn)))
	})
}

func TestSessionSocketNoDuplicatesUnderLoad(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{})
	for i := range 250 {
		appendAll(t, c, MessageEvent("agent", string(rune('a'+i%26))))
	}
	ctx, cancel := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for ctx.Err() == nil {
			if _, err := c.Append(MessageEvent("agent", "live")); err != nil {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	conn := mustDial(t, s, EndpointSession, c.ID(), url.Values{"after_seq": {"-1"}})
	require.Equal(t, "sync", readFrame(t, conn)["type"])
	next := 0.0
	for next < 300 {
		frame := readFrame(t, conn)
		if frame["type"] != "durable" {
			continue
		}
		require.Equal(t, next, frame["seq"], "durable frames arrive once each, in log order")
		next++
	}
	cancel()
	<-writerDone
}

func TestSessionSocketProgressAndStreaming(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{})
	appendAll(t, c, MessageEvent("user", "hi"))
	session := mustDial(t, s, EndpointSession, c.ID(), nil)
	legacy := mustDial(t, s, EndpointEvents, c.ID(), nil)
	require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 2))
	readFrames(t, session, 2) // sync, transient full_state
	require.True(t, isFullState(readFrame(t, legacy)))

	msg, err := c.StreamAgentMessage("Hel", "lo")
	require.NoError(t, err)
	frames := readFrames(t, session, 4)
	assert.Equal(t, map[string]any{"type": "item_started", "item_id": msg.ID(), "attempt": 1.0, "anchor_seq": 0.0}, frames[0])
	assert.Equal(t, map[string]any{"type": "delta", "item_id": msg.ID(), "attempt": 1.0, "order": 0.0, "kind": "text", "content": "Hel"}, frames[1])
	assert.Equal(t, "lo", frames[2]["content"])
	assert.Equal(t, "durable:1", frameTag(frames[3]))
	assert.Equal(t, msg.ID(), frames[3]["event"].(map[string]any)["id"], "the durable event retires the item")

	legacyFrames := readFrames(t, legacy, 3)
	assert.Equal(t, KindStreamingDeltaEvent, legacyFrames[0]["kind"])
	assert.Equal(t, "", legacyFrames[0]["content"], "1.58.2 blanks streamed text on the legacy socket")
	assert.NotContains(t, legacyFrames[0], "parent_id")
	assert.Equal(t, KindStreamingDeltaEvent, legacyFrames[1]["kind"])
	assert.Equal(t, msg.ID(), legacyFrames[2]["id"])
	assert.Len(t, c.Events(), 2, "deltas are never persisted")

	choice := 0
	require.NoError(t, c.SendDelta(Delta{ItemID: "x", Attempt: 2, Kind: "reasoning", Content: "hmm", ChunkID: "chatcmpl-1", ChoiceIndex: &choice}))
	require.NoError(t, c.AbortItem(ItemAborted{ItemID: "x", Attempt: 2, Reason: "cancelled"}))
	assert.Equal(t, map[string]any{"type": "delta", "item_id": "x", "attempt": 2.0, "order": 0.0, "kind": "reasoning",
		"content": "hmm", "chunk_id": "chatcmpl-1", "choice_index": 0.0}, readFrame(t, session))
	assert.Equal(t, map[string]any{"type": "item_aborted", "item_id": "x", "attempt": 2.0, "reason": "cancelled"}, readFrame(t, session))
}

func TestSessionSocketInbound(t *testing.T) {
	s := Start(t, Config{SessionAPIKeys: []string{testKey}})
	c := newConversation(t, s, ConversationOptions{})
	conn := mustDial(t, s, EndpointSession, c.ID(), url.Values{"session_api_key": {testKey}})
	readFrames(t, conn, 2)
	sendAuth(t, conn, testKey) // ignored
	require.NoError(t, conn.WriteMessage(websocket.TextMessage, []byte("not json")))
	frame := readFrame(t, conn)
	assert.Equal(t, "error", frame["type"])
	assert.Equal(t, "JSONDecodeError", frame["code"])
	sendJSON(t, conn, map[string]any{"role": "tool"})
	assert.Equal(t, "AssertionError", readFrame(t, conn)["code"])

	sendJSON(t, conn, map[string]any{"role": "user", "content": "go"})
	frames := readFrames(t, conn, 3)
	assert.Equal(t, KindMessageEvent, frames[0]["event"].(map[string]any)["kind"])
	assert.Equal(t, "durable:0", frameTag(frames[0]))
	assert.Equal(t, StatusRunning, frames[2]["event"].(map[string]any)["value"])
	assert.Len(t, s.InboundFrames(), 4)
}

func TestRestartKeepsLog(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{})
	require.NoError(t, c.Run())
	stored := appendAll(t, c, MessageEvent("user", "hi"), TerminalAction("sleep 100"))
	url1 := s.URL()
	conn := mustDial(t, s, EndpointEvents, c.ID(), nil)
	require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 1))

	require.NoError(t, s.Restart())
	assert.Equal(t, url1, s.URL())
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(waitTimeout)))
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			assert.True(t, websocket.IsUnexpectedCloseError(err), "dropped without a close frame: %v", err)
			break
		}
	}

	// The persisted running status is recovered as an error, and the
	// interrupted action is answered.
	assert.Equal(t, StatusError, c.Status())
	events := c.Events()
	require.Len(t, events, 5)
	assert.Equal(t, eventIDs(stored), eventIDs(events[1:3]))
	assert.Equal(t, StatusError, events[3]["value"])
	assert.Equal(t, KindAgentErrorEvent, events[4].Kind())
	assert.Equal(t, stored[1].ID(), events[4].ParentID())

	conn = mustDial(t, s, EndpointEvents, c.ID(), url.Values{"resend_mode": {"all"}})
	frames := readFrames(t, conn, 6)
	require.True(t, isFullState(frames[0]))
	assert.Equal(t, eventIDs(events), ids(frames[1:]))
	page := newAPIClient(t, s, "").getJSON("/api/conversations/" + c.ID() + "/events/search")
	assert.Len(t, page["items"], 5)
}

// TestRestartGracefully pins what 1.58.2 does on SIGTERM (recorded by the
// live test): the run under way is paused and persisted as such, and every
// socket is closed with 1012; the conversation comes back paused.
func TestRestartGracefully(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{})
	require.NoError(t, c.Run())
	appendAll(t, c, MessageEvent("user", "hi"), TerminalAction("sleep 100"))
	conn := mustDial(t, s, EndpointSession, c.ID(), url.Values{"after_seq": {"-1"}})
	require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 1))

	require.NoError(t, s.RestartGracefully())
	assert.Equal(t, 1012, expectClose(t, conn).Code)
	assert.Equal(t, StatusPaused, c.Status())
	events := c.Events()
	require.GreaterOrEqual(t, len(events), 2)
	assert.Equal(t, StatusPaused, events[len(events)-2]["value"])
	assert.Equal(t, KindPauseEvent, events[len(events)-1].Kind())
}

func TestOnRunPlaysTheAgent(t *testing.T) {
	s := Start(t, Config{OnRun: func(ctx context.Context, c *Conversation) {
		action, err := c.Append(TerminalAction("ls"))
		if err != nil {
			return
		}
		_, _ = c.Append(ObservationEvent(action, "README.md", false))
		_, _ = c.Append(MessageEvent("agent", "done"))
	}})
	c := newConversation(t, s, ConversationOptions{})
	conn := mustDial(t, s, EndpointEvents, c.ID(), nil)
	require.True(t, isFullState(readFrame(t, conn)))
	sendJSON(t, conn, map[string]any{"role": "user", "content": "list files"})

	var kinds []string
	for {
		frame := readFrame(t, conn)
		if isFullState(frame) {
			assert.Equal(t, StatusFinished, frame["value"].(map[string]any)["execution_status"])
			break
		}
		kind := frame["kind"].(string)
		if key, _ := frame["key"].(string); key != "" {
			kind += ":" + key
		}
		kinds = append(kinds, kind)
	}
	assert.Equal(t, []string{
		"MessageEvent", "ConversationStateUpdateEvent:last_user_message_id", "ConversationStateUpdateEvent:execution_status",
		"ActionEvent", "ObservationEvent", "MessageEvent", "ConversationStateUpdateEvent:execution_status",
	}, kinds)
	assert.Equal(t, StatusFinished, c.Status())
}

func TestOnRunCancelledByPause(t *testing.T) {
	started := make(chan struct{})
	stopped := make(chan struct{})
	s := Start(t, Config{OnRun: func(ctx context.Context, _ *Conversation) {
		close(started)
		<-ctx.Done()
		close(stopped)
	}})
	c := newConversation(t, s, ConversationOptions{})
	require.NoError(t, c.Run())
	<-started
	require.NoError(t, c.Pause())
	select {
	case <-stopped:
	case <-time.After(waitTimeout):
		t.Fatal("pause did not cancel the run")
	}
	assert.Equal(t, StatusPaused, c.Status())
}
