package aeprelaytest

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestSocketHello(t *testing.T) {
	r := Start(t, Config{BufferPerSession: 9})
	c := dial(t, r)
	c.send(emitterHello("alpha", "control.pause"))
	reply := c.readJSON()
	assert.Equal(t, "hello", reply["type"])
	assert.Equal(t, []any{"0.1"}, reply["versions"], "exactly one selected version")
	assert.Equal(t, "both", reply["role"])
	caps := reply["capabilities"].(map[string]any)
	assert.Equal(t, []any{"attr-match"}, caps["filters"])
	assert.Equal(t, map[string]any{"buffer": float64(9), "all": true}, caps["replay"])

	r.Await(t, "the hello record", func(r *Relay) bool { return len(r.Hellos()) == 1 })
	h := r.Hellos()[0]
	assert.Equal(t, "emitter", h.Role)
	assert.Equal(t, "alpha", h.Agent)
	assert.Equal(t, "test/1", h.Instance)
	assert.Equal(t, []string{"control.pause"}, h.Accepts)
	assert.Equal(t, int64(10000), h.AckWindowMS)
	conns := r.Connections()
	require.Len(t, conns, 1)
	assert.Equal(t, []string{"control.pause"}, conns[0].Accepts)
	assert.Empty(t, r.Violations())
}

func TestSocketVersionSelection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions string
		ok       bool
	}{
		{"newest first, one shared", `["0.2","0.1"]`, true},
		{"no intersection", `["0.2","1.0"]`, false},
		{"no versions", `[]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Start(t, Config{})
			c := dial(t, r)
			c.send(`{"type":"hello","role":"consumer","versions":` + tc.versions + `}`)
			reply := c.readJSON()
			if tc.ok {
				assert.Equal(t, map[string]any{"type": "hello", "versions": []any{"0.1"}}, map[string]any{"type": reply["type"], "versions": reply["versions"]})
				return
			}
			assert.Equal(t, "error", reply["type"])
			assert.Equal(t, "version-unsupported", reply["code"])
			assert.Equal(t, []any{"0.1"}, reply["versions"])
			var ce *websocket.CloseError
			require.ErrorAs(t, c.readClose(), &ce)
			assert.Equal(t, websocket.CloseProtocolError, ce.Code)
		})
	}
}

func TestSocketHelloRequired(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  int
		frame string
	}{
		{"an event first", websocket.TextMessage, event("session.started", "s1", 0, 0)},
		{"a ping first", websocket.TextMessage, `{"type":"ping","t":1}`},
		{"not JSON", websocket.TextMessage, `hello`},
		{"a binary frame first", websocket.BinaryMessage, `{"type":"hello","versions":["0.1"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Start(t, Config{})
			c := dial(t, r)
			require.NoError(t, c.ws.WriteMessage(tc.kind, []byte(tc.frame)))
			reply := c.readJSON()
			assert.Equal(t, "error", reply["type"])
			assert.Equal(t, "hello-required", reply["code"])
			var ce *websocket.CloseError
			require.ErrorAs(t, c.readClose(), &ce)
			assert.Equal(t, websocket.CloseProtocolError, ce.Code)
			assert.Zero(t, r.Received())
		})
	}
}

func TestSocketPingPong(t *testing.T) {
	r := Start(t, Config{})
	c := dial(t, r)
	c.greet(consumerHello)
	for _, tc := range []struct{ name, ping, pong string }{
		{"integer t", `{"type":"ping","t":1720000000}`, `{"type":"pong","t":1720000000}`},
		{"string t echoed as is", `{"type":"ping","t":"abc"}`, `{"type":"pong","t":"abc"}`},
		{"no t", `{"type":"ping"}`, `{"type":"pong"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := c.with(t)
			c.send(tc.ping)
			assert.JSONEq(t, tc.pong, string(c.read()))
		})
	}
	t.Run("unknown frame types are ignored", func(t *testing.T) {
		c := c.with(t)
		c.send(`{"type":"future-frame","x":1}`)
		c.send(`{"type":"ping","t":2}`)
		assert.JSONEq(t, `{"type":"pong","t":2}`, string(c.read()), "the next frame answers the ping")
		assert.Empty(t, r.Violations())
	})
}

func TestSocketBinaryFrameRejected(t *testing.T) {
	r := Start(t, Config{})
	c := dial(t, r)
	c.greet(consumerHello)
	require.NoError(t, c.ws.WriteMessage(websocket.BinaryMessage, []byte(event("session.started", "s1", 0, 0))))
	reply := c.readJSON()
	assert.Equal(t, "binary-frame", reply["code"])
	var ce *websocket.CloseError
	require.ErrorAs(t, c.readClose(), &ce)
	assert.Equal(t, websocket.CloseUnsupportedData, ce.Code)
	assert.Zero(t, r.Received())
	v := r.Violations()
	require.Len(t, v, 1)
	assert.ErrorIs(t, v[0].Err, ErrProtocol)
}

func TestSocketInvalidEventRefusedInBand(t *testing.T) {
	r := Start(t, Config{})
	c := dial(t, r)
	c.greet(emitterHello("alpha"))
	bad := `{"aep":"0.1","id":"bad-1","type":"session.started","time":"2026-07-03T10:00:00Z","source":"aep://host/agent/alpha","agent":"alpha"}`
	c.send(bad)
	reply := c.readJSON()
	assert.Equal(t, "error", reply["type"])
	assert.Equal(t, "invalid-event", reply["code"])
	assert.Equal(t, "bad-1", reply["cause"], "the refused Event is named by cause, as the reference relay does")
	assert.NotEmpty(t, reply["detail"])
	v := r.Violations()
	require.Len(t, v, 1)
	assert.Equal(t, ViolationSchema, v[0].Kind)
	assert.Equal(t, BindingSocket, v[0].Binding)

	c.send(`{"type":"ping","t":7}`)
	assert.JSONEq(t, `{"type":"pong","t":7}`, string(c.read()), "the connection survives")
	c.send(`[1,2]`)
	assert.Equal(t, "invalid-frame", c.readJSON()["code"])
}

// TestRefusePolicy plays a relay stricter than the schema: the Event it
// refuses is named by cause on the socket, before the pong of the ping
// that follows it, and by line on POST; nothing of it is ingested and no
// violation is recorded.
func TestRefusePolicy(t *testing.T) {
	policy := func(ev *aep.Event) error {
		if ev.Seq != nil && *ev.Seq == 1 {
			return errors.New("seq 1 is not welcome here")
		}
		return nil
	}
	t.Run("socket", func(t *testing.T) {
		r := Start(t, Config{Refuse: policy})
		c := dial(t, r)
		c.greet(emitterHello("alpha"))
		c.send(event("progress.status", "s1", 0, 0))
		c.send(event("progress.status", "s1", 0, 1))
		c.send(event("progress.status", "s1", 0, 2))
		c.send(`{"type":"ping","t":1}`)
		reply := c.readJSON()
		assert.Equal(t, "error", reply["type"])
		assert.Equal(t, "invalid-event", reply["code"])
		assert.Equal(t, "ev-s1-0-1-progress.status", reply["cause"])
		assert.Equal(t, "seq 1 is not welcome here", reply["detail"])
		assert.JSONEq(t, `{"type":"pong","t":1}`, string(c.read()))
		assert.Equal(t, 2, r.Received())
		assert.Empty(t, r.Violations())
	})
	t.Run("post", func(t *testing.T) {
		r := Start(t, Config{Refuse: policy})
		body := event("progress.status", "s1", 0, 0) + "\n" + event("progress.status", "s1", 0, 1) + "\n"
		status, answer := post(t, r, "application/x-ndjson", body, nil)
		require.Equal(t, http.StatusBadRequest, status)
		assert.Equal(t, map[string]any{"error": "invalid-event", "detail": "seq 1 is not welcome here", "line": float64(1)}, answer)
		assert.Zero(t, r.Received(), "the whole batch is refused")
		assert.Empty(t, r.Violations())
	})
}

func TestSocketEventsAreDedupedAndForwardedAsReceived(t *testing.T) {
	r := Start(t, Config{})
	watcher := dial(t, r)
	watcher.greet(consumerHello)
	watcher.send(`{"type":"subscribe","id":"all"}`)
	assert.JSONEq(t, `{"type":"subscribed","id":"all"}`, string(watcher.read()))

	emitter := dial(t, r)
	emitter.greet(emitterHello("alpha"))
	first := event("session.started", "s1", 0, 0)
	second := event("run.started", "s1", 0, 1)
	for _, raw := range []string{first, second, first, second} {
		emitter.send(raw)
	}
	for _, want := range []string{first, second, first, second} {
		assert.Equal(t, want, string(watcher.read()), "live fan-out forwards redeliveries byte-identically")
	}
	r.Await(t, "four receipts", func(r *Relay) bool { return r.Received() == 4 })
	assert.Len(t, r.Events(), 2, "Events dedupes on (source, id)")
	assert.Len(t, r.SessionEvents(sourceOf("s1"), "s1"), 2, "buffer admission dedupes")
	assert.Empty(t, r.Violations())
	rec := r.Events()[0]
	assert.Equal(t, BindingSocket, rec.Binding)
	assert.Equal(t, r.Connections()[1].ID, rec.Conn)
}

func TestSocketSubscriptions(t *testing.T) {
	r := Start(t, Config{BufferPerSession: 3})
	for seq := range 5 {
		status, _ := post(t, r, "application/json", event("progress.status", "s1", 0, seq), nil)
		require.Equal(t, http.StatusAccepted, status)
	}
	status, _ := post(t, r, "application/json", event("tool.requested", "s2", 0, 0), nil)
	require.Equal(t, http.StatusAccepted, status)

	c := dial(t, r)
	c.greet(consumerHello)
	t.Run("replay from a resume point, then live", func(t *testing.T) {
		c := c.with(t)
		c.send(`{"type":"subscribe","id":"a","filter":{"session":"s1"},"from":[{"session":"s1","epoch":0,"seq":3}]}`)
		assert.JSONEq(t, `{"type":"subscribed","id":"a"}`, string(c.read()))
		assert.Equal(t, event("progress.status", "s1", 0, 4), string(c.read()))
		status, _ := post(t, r, "application/json", event("progress.status", "s1", 0, 5), nil)
		require.Equal(t, http.StatusAccepted, status)
		assert.Equal(t, event("progress.status", "s1", 0, 5), string(c.read()))
	})
	t.Run("replay-exhausted when the resume point was trimmed", func(t *testing.T) {
		c := c.with(t)
		c.send(`{"type":"subscribe","id":"b","filter":{"type":"nothing.matches"},"from":[{"session":"s1","seq":0}]}`)
		assert.JSONEq(t, `{"type":"subscribed","id":"b"}`, string(c.read()))
		assert.JSONEq(t, `{"type":"replay-exhausted","sub":"b","session":"s1","earliest":{"epoch":0,"seq":3}}`, string(c.read()))
	})
	t.Run("replay-all with a type pattern", func(t *testing.T) {
		c := c.with(t)
		c.send(`{"type":"subscribe","id":"c","filter":{"type":"tool.*"},"from":"all"}`)
		assert.JSONEq(t, `{"type":"subscribed","id":"c"}`, string(c.read()))
		assert.Equal(t, event("tool.requested", "s2", 0, 0), string(c.read()))
	})
	t.Run("refusals keep the connection", func(t *testing.T) {
		c := c.with(t)
		for _, tc := range []struct{ frame, code string }{
			{`{"type":"subscribe","id":"d","filter":{"seq":1}}`, "invalid-filter"},
			{`{"type":"subscribe","id":"d","from":"some"}`, "invalid-filter"},
			{`{"type":"subscribe","id":"d","capture":"loud"}`, "invalid-filter"},
			{`{"type":"subscribe","id":"a"}`, "invalid-filter"},
			{`{"type":"subscribe"}`, "invalid-filter"},
		} {
			c.send(tc.frame)
			reply := c.readJSON()
			assert.Equal(t, "error", reply["type"], tc.frame)
			assert.Equal(t, tc.code, reply["code"], tc.frame)
		}
	})
	t.Run("unsubscribe", func(t *testing.T) {
		c := c.with(t)
		for _, id := range []string{"a", "b", "c"} {
			c.send(`{"type":"unsubscribe","id":"` + id + `"}`)
			assert.JSONEq(t, `{"type":"unsubscribed","id":"`+id+`"}`, string(c.read()))
		}
		status, _ := post(t, r, "application/json", event("progress.status", "s1", 0, 6), nil)
		require.Equal(t, http.StatusAccepted, status)
		c.expectSilence(200 * time.Millisecond)
	})
}

func TestSocketSubscriptionCaptureCeiling(t *testing.T) {
	r := Start(t, Config{})
	c := dial(t, r)
	c.greet(consumerHello)
	c.send(`{"type":"subscribe","id":"m","capture":"none"}`)
	assert.JSONEq(t, `{"type":"subscribed","id":"m"}`, string(c.read()))
	rich := `{"aep":"0.1","id":"cap-1","type":"run.started","time":"2026-07-03T10:00:00Z","source":"aep://host/agent/alpha/session/s1","agent":"alpha","session":"s1","run":"r1","seq":0,"capture":"metadata","data":{"trigger":"user"}}`
	status, _ := post(t, r, "application/json", rich, nil)
	require.Equal(t, http.StatusAccepted, status)
	var got map[string]any
	require.NoError(t, json.Unmarshal(c.read(), &got))
	assert.Equal(t, "none", got["capture"], "down-levelled to the ceiling")
	assert.NotContains(t, got, "data")
}

func TestSocketRoster(t *testing.T) {
	r := Start(t, Config{})
	emitter := dial(t, r)
	emitter.greet(emitterHello("alpha", "control.pause"))
	emitter.send(event("session.started", "s1", 0, 0))
	r.Await(t, "the claim", func(r *Relay) bool { return len(r.Events()) == 1 })

	watcher := dial(t, r)
	watcher.greet(consumerHello)
	watcher.send(`{"type":"roster","id":"r-1"}`)
	assert.JSONEq(t, `{"type":"roster","id":"r-1","entries":[{"session":"s1","agent":"alpha","instance":"test/1","control":{"accepts":["control.pause"],"ack_window_ms":10000}}]}`,
		string(watcher.read()))

	emitter.send(`{"type":"roster","id":"r-2"}`)
	assert.JSONEq(t, `{"type":"error","id":"r-2","code":"unauthorized","detail":"emitter connections may not request the roster"}`, string(emitter.read()))
}

func TestSocketProtocolViolationsAreRecorded(t *testing.T) {
	r := Start(t, Config{})
	c := dial(t, r)
	c.greet(`{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"alpha"}}`)
	c.send(`{"aep":"0.1","id":"f-1","type":"session.started","time":"2026-07-03T10:00:00Z","source":"aep://host/agent/beta/session/s1","agent":"beta","session":"s1","seq":0}`)
	c.send(`{"type":"hello","versions":["0.1"]}`)
	r.Await(t, "two violations", func(r *Relay) bool { return len(r.Violations()) == 2 })
	for _, v := range r.Violations() {
		assert.Equal(t, ViolationProtocol, v.Kind)
		assert.ErrorIs(t, v.Err, ErrProtocol)
	}
	assert.Equal(t, 1, r.Received(), "the Event is still ingested")
}
