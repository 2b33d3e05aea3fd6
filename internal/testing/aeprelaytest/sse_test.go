package aeprelaytest

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func postAll(t *testing.T, r *Relay, events ...string) {
	t.Helper()
	for _, e := range events {
		status, body := post(t, r, "application/json", e, nil)
		require.Equal(t, http.StatusAccepted, status, "body %v", body)
	}
}

func TestStreamFilterAndLive(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query string
	}{
		{"filter JSON", "filter=" + url.QueryEscape(`{"session":"s1","type":["tool.*"]}`)},
		{"shorthand parameters", "session=s1&type=tool.*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Start(t, Config{})
			s := openStream(t, r, tc.query, nil)
			r.Await(t, "the stream", func(r *Relay) bool { return r.Subscribers() == 1 })
			postAll(t, r,
				event("progress.status", "s1", 0, 0),
				event("tool.requested", "s2", 0, 0),
				event("tool.requested", "s1", 0, 1),
			)
			m := s.nextEvent()
			assert.Equal(t, "tool.requested", m.event)
			assert.Equal(t, "s1:0:1", m.id)
			assert.Equal(t, event("tool.requested", "s1", 0, 1), m.data, "byte-identical")
		})
	}
}

func TestStreamResume(t *testing.T) {
	r := Start(t, Config{BufferPerSession: 3})
	for seq := range 6 {
		postAll(t, r, event("progress.status", "s1", 0, seq))
	}
	postAll(t, r, event("progress.status", "s2", 1, 0))
	for _, tc := range []struct {
		name      string
		query     string
		headers   map[string]string
		exhausted string
		want      []string
	}{
		{"Last-Event-ID", "live=0", map[string]string{"Last-Event-ID": "s1:0:3"}, "", []string{"s1:0:4", "s1:0:5"}},
		{"from array", "live=0&from=" + url.QueryEscape(`[{"session":"s1","epoch":0,"seq":4},{"session":"s2","epoch":0,"seq":9}]`), nil, "",
			[]string{"s1:0:5", "s2:1:0"}},
		{"from takes precedence", "live=0&from=" + url.QueryEscape(`[{"session":"s1","epoch":0,"seq":4}]`), map[string]string{"Last-Event-ID": "s1:0:0"}, "",
			[]string{"s1:0:5"}},
		{"trimmed resume point", "live=0", map[string]string{"Last-Event-ID": "s1:0:1"}, "replay-exhausted s1 0:3",
			[]string{"s1:0:3", "s1:0:4", "s1:0:5"}},
		{"replay-all", "live=0&from=all", nil, "", []string{"s1:0:3", "s1:0:4", "s1:0:5", "s2:1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStream(t, r, tc.query, tc.headers)
			if tc.exhausted != "" {
				assert.Equal(t, tc.exhausted, s.next().comment)
			}
			for _, id := range tc.want {
				assert.Equal(t, id, s.nextEvent().id)
			}
			_, err := s.lines.ReadString('\n')
			assert.Error(t, err, "live=0 ends after the replay")
		})
	}
	t.Run("bad requests", func(t *testing.T) {
		for _, q := range []string{"filter=" + url.QueryEscape(`{"seq":1}`), "from=oops", "capture=loud",
			"session=s1&filter=" + url.QueryEscape(`{"session":"s2"}`)} {
			status, body := get(t, r, "/stream?"+q, "")
			assert.Equal(t, http.StatusBadRequest, status, q)
			assert.Equal(t, "invalid-filter", body["error"], q)
		}
	})
}

func TestStreamAgentEventsAreLiveOnly(t *testing.T) {
	r := Start(t, Config{})
	presence := `{"aep":"0.1","id":"p-1","type":"agent.presence","time":"2026-07-03T10:00:00Z","source":"aep://host/agent/alpha","agent":"alpha","data":{"state":"online"}}`
	s := openStream(t, r, "type=agent.*", nil)
	r.Await(t, "the stream", func(r *Relay) bool { return r.Subscribers() == 1 })
	postAll(t, r, presence)
	m := s.nextEvent()
	assert.Equal(t, "agent.presence", m.event)
	assert.Empty(t, m.id, "agent-scoped Events carry no id")
	assert.Empty(t, r.Sessions(), "never buffered")
}

func TestStreamShutdown(t *testing.T) {
	r, err := New(Config{})
	require.NoError(t, err)
	s := openStream(t, r, "", nil)
	r.Await(t, "the stream", func(r *Relay) bool { return r.Subscribers() == 1 })
	r.Close()
	assert.Equal(t, "shutting-down", s.next().comment)
}

func TestStreamHeartbeat(t *testing.T) {
	r := Start(t, Config{Heartbeat: 20 * time.Millisecond})
	s := openStream(t, r, "", nil)
	assert.Equal(t, "ping", s.next().comment)
}

// TestSubscribe: the consumer authenticates with the relay's token and
// receives each matching message's data byte for byte, in order, from
// what is admitted once Subscribe returns.
func TestSubscribe(t *testing.T) {
	r := Start(t, Config{Token: "tok"})
	data := r.Subscribe(t, "session=s1")
	postAll(t, r,
		event("progress.status", "s2", 0, 0),
		event("progress.status", "s1", 0, 0),
		event("tool.requested", "s1", 0, 1),
	)
	for _, want := range []string{event("progress.status", "s1", 0, 0), event("tool.requested", "s1", 0, 1)} {
		select {
		case got := <-data:
			assert.Equal(t, want, string(got))
		case <-time.After(waitBound):
			t.Fatalf("no message within %s, want %s", waitBound, want)
		}
	}
}
