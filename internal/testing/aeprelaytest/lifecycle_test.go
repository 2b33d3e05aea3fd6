package aeprelaytest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     RestartMode
		buffered int
	}{
		{"keep state", KeepState, 1},
		{"clear state", ClearState, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Start(t, Config{})
			url := r.URL()
			postAll(t, r, event("session.started", "s1", 0, 0))
			c := dial(t, r)
			c.greet(consumerHello)
			c.send(`{"type":"subscribe","id":"w","filter":{"session":"s1"}}`)
			assert.JSONEq(t, `{"type":"subscribed","id":"w"}`, string(c.read()))
			postAll(t, r, event("run.started", "s1", 0, 1))
			c.read()

			require.NoError(t, r.Restart(tc.mode))
			assert.JSONEq(t, `{"type":"closing","reason":"relay shutting down","delivered":[{"sub":"w","session":"s1","epoch":0,"seq":1}]}`,
				string(c.read()), "an orderly close names the delivered positions")
			var ce *websocket.CloseError
			require.ErrorAs(t, c.readClose(), &ce)
			assert.Equal(t, websocket.CloseGoingAway, ce.Code)

			assert.Equal(t, url, r.URL(), "same address")
			assert.Len(t, r.SessionEvents(sourceOf("s1"), "s1"), 2*tc.buffered)
			postAll(t, r, event("run.finished", "s1", 0, 2))
			assert.Len(t, r.SessionEvents(sourceOf("s1"), "s1"), 2*tc.buffered+1)
			dial(t, r).greet(consumerHello)
		})
	}
	t.Run("after Close", func(t *testing.T) {
		r, err := New(Config{})
		require.NoError(t, err)
		r.Close()
		r.Close()
		assert.Error(t, r.Restart(KeepState))
	})
}

func TestSetDown(t *testing.T) {
	r := Start(t, Config{})
	open := dial(t, r)
	open.greet(consumerHello)
	r.SetDown(true)
	status, _ := post(t, r, "application/json", event("session.started", "s1", 0, 0), nil)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	status, _ = get(t, r, "/healthz", "")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	_, resp, err := websocket.DefaultDialer.Dial(r.SocketURL(), nil)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp.Body.Close()
	open.send(`{"type":"ping","t":1}`)
	assert.JSONEq(t, `{"type":"pong","t":1}`, string(open.read()), "open connections are untouched")

	r.SetDown(false)
	status, _ = post(t, r, "application/json", event("session.started", "s1", 0, 0), nil)
	assert.Equal(t, http.StatusAccepted, status)
}

func TestSetToken(t *testing.T) {
	r := Start(t, Config{Token: "old"})
	open := dial(t, r)
	open.greet(consumerHello)
	r.SetToken("new")
	status, _ := post(t, r, "application/json", event("session.started", "s1", 0, 0), nil)
	assert.Equal(t, http.StatusUnauthorized, status, "the old token is refused")
	_, resp, err := websocket.DefaultDialer.Dial(r.SocketURL()+"?access_token=old", nil)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp.Body.Close()
	open.send(`{"type":"ping","t":1}`)
	assert.JSONEq(t, `{"type":"pong","t":1}`, string(open.read()), "open connections are untouched")

	status, _ = post(t, r, "application/json", event("session.started", "s1", 0, 0), map[string]string{"Authorization": "Bearer new"})
	assert.Equal(t, http.StatusAccepted, status)
}

func TestDropConnections(t *testing.T) {
	r := Start(t, Config{})
	c := dial(t, r)
	c.greet(consumerHello)
	s := openStream(t, r, "", nil)
	r.Await(t, "the stream", func(r *Relay) bool { return r.Subscribers() == 1 })
	r.DropConnections()
	err := c.readClose()
	var ce *websocket.CloseError
	if assert.ErrorAs(t, err, &ce) {
		assert.Equal(t, websocket.CloseAbnormalClosure, ce.Code, "no close frame")
	}
	_, err = s.lines.ReadString('\n')
	assert.Error(t, err, "the SSE stream is cut")
	r.Await(t, "no connections", func(r *Relay) bool { return len(r.Connections()) == 0 && r.Subscribers() == 0 })
	dial(t, r).greet(consumerHello)
}

func TestSetPong(t *testing.T) {
	r := Start(t, Config{})
	greeted := func(t *testing.T) *client {
		c := dial(t, r)
		c.greet(consumerHello)
		return c
	}
	t.Run("delay", func(t *testing.T) {
		r.SetPong(PongMode{Delay: 150 * time.Millisecond})
		c := greeted(t)
		sent := time.Now()
		c.send(`{"type":"ping","t":1}`)
		assert.JSONEq(t, `{"type":"pong","t":1}`, string(c.read()))
		assert.GreaterOrEqual(t, time.Since(sent), 150*time.Millisecond)
	})
	t.Run("never", func(t *testing.T) {
		r.SetPong(PongMode{Never: true})
		c := greeted(t)
		c.send(`{"type":"ping","t":2}`)
		c.expectSilence(200 * time.Millisecond)
	})
	t.Run("never answers control pings either", func(t *testing.T) {
		r.SetPong(PongMode{Never: true})
		c := greeted(t)
		pong := make(chan string, 1)
		c.ws.SetPongHandler(func(data string) error { pong <- data; return nil })
		require.NoError(t, c.ws.WriteControl(websocket.PingMessage, []byte("x"), time.Now().Add(waitBound)))
		c.expectSilence(200 * time.Millisecond)
		assert.Empty(t, pong)
	})
	t.Run("control pings answered", func(t *testing.T) {
		r.SetPong(PongMode{})
		c := greeted(t)
		pong := make(chan string, 1)
		c.ws.SetPongHandler(func(data string) error { pong <- data; return nil })
		require.NoError(t, c.ws.WriteControl(websocket.PingMessage, []byte("x"), time.Now().Add(waitBound)))
		c.send(`{"type":"ping","t":3}`)
		assert.JSONEq(t, `{"type":"pong","t":3}`, string(c.read()), "the control pong is handled while reading")
		assert.Equal(t, "x", <-pong)
	})
	t.Run("a delayed pong pending at close leaks nothing", func(t *testing.T) {
		r.SetPong(PongMode{Delay: time.Hour})
		c := greeted(t)
		before := len(r.Frames())
		c.send(`{"type":"ping","t":4}`)
		r.Await(t, "the ping", func(r *Relay) bool { return len(r.Frames()) == before+1 })
	})
}

func TestRelayPings(t *testing.T) {
	r := Start(t, Config{PingInterval: 20 * time.Millisecond, PongTimeout: 150 * time.Millisecond})
	t.Run("answered", func(t *testing.T) {
		c := dial(t, r)
		c.greet(consumerHello)
		for range 3 {
			var ping map[string]any
			require.NoError(t, json.Unmarshal(c.read(), &ping))
			require.Equal(t, "ping", ping["type"])
			c.send(`{"type":"pong","t":` + string(mustJSON(t, ping["t"])) + `}`)
		}
		r.Await(t, "three pongs", func(r *Relay) bool {
			n := 0
			for _, f := range r.Frames() {
				if f.Type == "pong" {
					n++
				}
			}
			return n == 3
		})
	})
	t.Run("unanswered drops the connection", func(t *testing.T) {
		c := dial(t, r)
		c.greet(consumerHello)
		var ce *websocket.CloseError
		err := c.readClose()
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, websocket.CloseAbnormalClosure, ce.Code)
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

func TestSendFrame(t *testing.T) {
	r := Start(t, Config{})
	c := dial(t, r)
	c.greet(consumerHello)
	id := r.Connections()[0].ID
	require.NoError(t, r.SendFrame(id, []byte(`{"type":"future-frame"}`)))
	assert.Equal(t, `{"type":"future-frame"}`, string(c.read()))
	assert.Error(t, r.SendFrame(id+1, []byte(`{}`)))
}

func TestWaitForHonoursItsContext(t *testing.T) {
	r := Start(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.WaitFor(ctx, func(r *Relay) bool { return r.Received() > 0 })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestOutboxBoundsLiveItemsOnly(t *testing.T) {
	o := newOutbox[int](2)
	assert.True(t, o.push(1, true))
	assert.True(t, o.push(2, true))
	assert.False(t, o.push(3, true), "the third live item overflows")
	assert.True(t, o.push(4, false), "replay and control items always fit")
	assert.Equal(t, []int{1, 2, 4}, o.take())
	assert.True(t, o.push(5, true), "taking frees the room")
	o.close()
	assert.False(t, o.push(6, false))
}

func TestConfigRefusesNegativeLimits(t *testing.T) {
	_, err := New(Config{MaxBody: -1})
	assert.ErrorContains(t, err, "MaxBody")
}
