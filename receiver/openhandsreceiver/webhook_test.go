package openhandsreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// hookFront stands where a server's webhook base_url points: it forwards
// to the receiver's sink once the receiver has started (its port is
// picked at listen time), and answers 503 before, which the server retries.
type hookFront struct {
	url    string
	target atomic.Pointer[url.URL]
}

func startHookFront(t testing.TB) *hookFront {
	f := &hookFront{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := f.target.Load()
		if target == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/openhands"
	return f
}

// webhookConfig is fastConfig for the stubs, each with its own key, and
// a webhook sink on a free port.
func webhookConfig(socket string, keys []string, stubs ...*oh.Server) *Config {
	cfg := fastConfig(socket, stubs...)
	for i := range cfg.Servers {
		cfg.Servers[i].SessionAPIKey = configopaque.String(keys[i])
		cfg.Servers[i].Name = keys[i]
	}
	hook := cfg.Webhook.GetOrInsertDefault()
	hook.NetAddr.Endpoint = "127.0.0.1:0"
	hook.MaxRequestBodySize = 64 << 10
	return cfg
}

// startWebhookHarness starts the receiver and points front at its sink.
func startWebhookHarness(t *testing.T, cfg *Config, front *hookFront) *harness {
	t.Helper()
	h := startHarness(t, cfg)
	front.target.Store(sinkURL(h.rcv.webhook))
	return h
}

// startPushOnly starts a webhook harness on socket, with a server of its
// own, that polls only at start, and returns once that poll (which finds
// nothing) is done: what attaches afterwards came by push.
func startPushOnly(t *testing.T, socket string) (*oh.Server, *harness) {
	t.Helper()
	front := startHookFront(t)
	stub := hookStub(t, testKey, front)
	cfg := webhookConfig(socket, []string{testKey}, stub)
	cfg.PollInterval = time.Hour
	h := startWebhookHarness(t, cfg, front)
	require.Eventually(t, func() bool { return h.host.last() == componentstatus.StatusOK }, waitFor, tick, "the first poll is done")
	return stub, h
}

func sinkURL(sink *webhookSink) *url.URL {
	return &url.URL{Scheme: "http", Host: sink.addr.String()}
}

// hookStub is a stub whose webhook, if front is set, posts to front at
// once (a buffer of one event) and retries until the receiver is up.
func hookStub(t *testing.T, key string, front *hookFront) *oh.Server {
	cfg := oh.Config{SessionAPIKeys: []string{key}}
	if front != nil {
		cfg.Webhooks = []oh.WebhookSpec{{BaseURL: front.url, EventBufferSize: 1, FlushDelay: time.Second, NumRetries: 100, RetryDelay: 20 * time.Millisecond}}
	}
	return oh.Start(t, cfg)
}

// hookRequests counts the sink's POSTs of server with outcome.
func (h *harness) hookRequests(server, outcome string) int64 {
	h.t.Helper()
	m, err := h.tel.GetMetric("otelcol_openhands_webhook_requests")
	if err != nil {
		return 0
	}
	var total int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		s, _ := dp.Attributes.Value("server")
		o, _ := dp.Attributes.Value("outcome")
		if s.AsString() == server && o.AsString() == outcome {
			total += dp.Value
		}
	}
	return total
}

func TestWebhookRefusesWhatIsNotAServersPush(t *testing.T) {
	a, b := hookStub(t, "key-a", nil), hookStub(t, "key-b", nil)
	h := startHarness(t, webhookConfig(socketSession, []string{"key-a", "key-b"}, a, b))
	base := "http://" + h.rcv.webhook.addr.String()
	conv := createConversation(t, b)
	big := "[" + strings.Repeat(`{"kind":"MessageEvent","id":"x"},`, 4096) + "{}]"
	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
		server, outcome               string
	}{
		{"no key", "POST", "/events/" + conv.HexID(), "", "[]", 401, "", hookUnauthorized},
		{"a wrong key", "POST", "/events/" + conv.HexID(), "key-c", "[]", 401, "", hookUnauthorized},
		{"a key's prefix", "POST", "/events/" + conv.HexID(), "key-", "[]", 401, "", hookUnauthorized},
		{"not a webhook path", "POST", "/other", "key-b", "[]", 404, "key-b", hookNotFound},
		{"a batch that is not a list", "POST", "/events/" + conv.HexID(), "key-b", `{"kind":"MessageEvent"}`, 400, "key-b", hookMalformed},
		{"a batch that is not JSON", "POST", "/events/" + conv.HexID(), "key-b", `[{"kind":`, 400, "key-b", hookMalformed},
		{"an id that is not a conversation id", "POST", "/events/not-a-uuid", "key-b", "[]", 400, "key-b", hookMalformed},
		{"an id that is a path", "POST", "/events/..%2F..%2Fx", "key-b", "[]", 404, "key-b", hookNotFound},
		{"info that is not a ConversationInfo", "POST", "/conversations", "key-a", `{"id":7}`, 400, "key-a", hookMalformed},
		{"a body past max_request_body_size", "POST", "/events/" + conv.HexID(), "key-b", big, 413, "key-b", hookTooLarge},
		{"an empty batch, told apart by its key", "POST", "/hook/events/" + conv.HexID(), "key-b", "[]", 200, "key-b", hookAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.hookRequests(tc.server, tc.outcome)
			req, err := http.NewRequest(tc.method, base+tc.path, bytes.NewBufferString(tc.body))
			require.NoError(t, err)
			if tc.key != "" {
				req.Header.Set(sessionKeyHeader, tc.key)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, before+1, h.hookRequests(tc.server, tc.outcome))
		})
	}
	assert.Equal(t, componentstatus.StatusOK, h.host.last(), "bad pushes never fail the receiver")
}

// A conversation the webhook announces attaches at once, though the next
// poll is an hour away.
func TestWebhookAttachesWithoutPolling(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub, h := startPushOnly(t, socket)
		conv := createConversation(t, stub)
		waitSockets(t, conv, 1)
		mustAppend(t, conv, oh.MessageEvent("user", "hello"))
		h.waitTypes(conv.ID(), "session.started", "x.openhands.message.event")
	})
}

// With both channels on, each vendor event is one AEP event, whichever
// channel brings it first: here the webhook, while the server refuses the
// socket, then the socket, whose replay repeats all of it.
func TestWebhookAndSocketNeverDuplicate(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		front := startHookFront(t)
		stub := hookStub(t, testKey, front)
		conv := createConversation(t, stub)
		conv.RefuseSocketsFor(time.Hour, "try_again_later")
		h := startWebhookHarness(t, webhookConfig(socket, []string{testKey}, stub), front)
		first := mustAppend(t, conv, oh.MessageEvent("user", "one"))
		second := mustAppend(t, conv, oh.MessageEvent("agent", "two"))
		h.waitTypes(conv.ID(), "session.started", "x.openhands.message.event", "x.openhands.message.event")
		assert.Zero(t, conv.Sockets(), "the webhook brought them")

		conv.RefuseSocketsFor(0, "")
		waitSockets(t, conv, 1)
		h.waitLive(conv, 1) // the socket's replay is processed: its copies of both were dropped
		require.Eventually(t, func() bool { return h.metric("otelcol_openhands_duplicates_dropped", "", "") >= 2 }, waitFor, tick)
		mustStatus(t, conv, oh.StatusRunning)
		mustStatus(t, conv, oh.StatusFinished)
		h.waitTypes(conv.ID(), "state.delta", "run.finished")
		require.Eventually(t, func() bool { return stub.WebhookStats().Batches >= 4 }, waitFor, tick, "the webhook's copies of the status updates")
		h.validate()
		h.assertEveryVendorEventOnce(conv)

		evs := h.session(conv.ID())
		byVendor := map[string]*aep.Event{}
		for _, ev := range evs {
			if id, _ := ev.Data["vendor_event_id"].(string); id != "" {
				byVendor[id] = ev
			}
		}
		require.Contains(t, byVendor, second.ID())
		assert.Equal(t, byVendor[first.ID()].ID, byVendor[second.ID()].Cause, "parent_id becomes cause")
	})
}

// A rename changes no event; the webhook's ConversationInfo shows it, as
// state.delta of the session.
func TestWebhookTitleRename(t *testing.T) {
	front := startHookFront(t)
	stub := hookStub(t, testKey, front)
	cfg := webhookConfig(socketSession, []string{testKey}, stub)
	cfg.Capture.Level = aep.CaptureRedacted // the value rides at redacted
	h := startWebhookHarness(t, cfg, front)
	conv := createConversation(t, stub)
	waitSockets(t, conv, 1)
	conv.SetTitle("Fix the flaky test")
	got := last(h.waitTypes(conv.ID(), "state.delta"), "state.delta")
	assert.Equal(t, "title", got.Data["key"])
	assert.Equal(t, []any{map[string]any{"op": "replace", "path": "/title", "value": "Fix the flaky test"}}, got.Data["delta"])
	conv.SetTitle("Fix the flaky test") // the same title again says nothing
	require.Eventually(t, func() bool { return stub.WebhookStats().Infos == 3 }, waitFor, tick, "start and two renames taken in")
	assert.Equal(t, 1, count(h.session(conv.ID()), "state.delta"))
	conv.SetTitle("Renamed")
	require.Eventually(t, func() bool { return count(h.session(conv.ID()), "state.delta") == 2 }, waitFor, tick)
	h.validate()
}

// Tags are a state field (1.58.2): a change is a stored
// ConversationStateUpdateEvent(key=tags), and the server posts the
// ConversationInfo as well. The change is announced once, from the event,
// whichever channel brings it; the tags set at the start are in the state,
// not a change.
func TestWebhookTagsChangeOnce(t *testing.T) {
	for _, only := range []bool{false, true} {
		t.Run(map[bool]string{false: "sockets and webhook", true: "webhook only"}[only], func(t *testing.T) {
			front := startHookFront(t)
			stub := hookStub(t, testKey, front)
			cfg := webhookConfig(socketSession, []string{testKey}, stub)
			cfg.Capture.Level = aep.CaptureRedacted // the value rides at redacted
			cfg.Webhook.Get().Only = only
			h := startWebhookHarness(t, cfg, front)
			conv, err := stub.CreateConversation(oh.ConversationOptions{Tags: map[string]string{"team": "infra"}})
			require.NoError(t, err)
			h.waitTypes(conv.ID(), "session.started")
			_, err = conv.SetTags(map[string]string{"team": "infra", "ticket": "OPS-7"})
			require.NoError(t, err)
			got := last(h.waitTypes(conv.ID(), "state.delta"), "state.delta")
			assert.Equal(t, "tags", got.Data["key"])
			assert.Equal(t, []any{map[string]any{"op": "replace", "path": "/tags",
				"value": map[string]any{"team": "infra", "ticket": "OPS-7"}}}, got.Data["delta"])
			// The start's and the update's ConversationInfo were taken in
			// (the sink answers once it has), and the rename after them too.
			conv.SetTitle("Tagged")
			require.Eventually(t, func() bool { return stub.WebhookStats().Infos == 3 }, waitFor, tick)
			require.Eventually(t, func() bool { return count(h.session(conv.ID()), "state.delta") == 2 }, waitFor, tick)
			var keys []any
			for _, ev := range h.session(conv.ID()) {
				if ev.Type == "state.delta" {
					keys = append(keys, ev.Data["key"])
				}
			}
			assert.Equal(t, []any{"tags", "title"}, keys, "the tags change once, then the rename")
			h.validate()
		})
	}
}

// With webhook.only there is no socket: the pushes bring the events, and
// what the server dropped from them (oldest first, past max_queue_size
// while the sink was unreachable) is read back from events/search, so
// every event is emitted once, in log order.
func TestWebhookOnlyBackfillsWhatTheServerDropped(t *testing.T) {
	front := startHookFront(t)
	stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{testKey}, Webhooks: []oh.WebhookSpec{{
		BaseURL: front.url, EventBufferSize: 1, FlushDelay: 20 * time.Millisecond, MaxQueueSize: 1,
	}}})
	conv := createConversation(t, stub)
	first := mustAppend(t, conv, oh.MessageEvent("user", "before the receiver"))
	cfg := webhookConfig(socketSession, []string{testKey}, stub)
	cfg.PollInterval = time.Hour
	cfg.Webhook.Get().Only = true
	h := startHarness(t, cfg)
	h.waitTypes(conv.ID(), "session.started", "x.openhands.message.event") // the first poll's backfill

	ids := []string{first.ID()}
	for _, text := range []string{"dropped", "dropped too", "kept"} {
		ids = append(ids, mustAppend(t, conv, oh.MessageEvent("agent", text)).ID())
	}
	require.Eventually(t, func() bool { return stub.WebhookStats().Dropped >= 2 }, waitFor, tick)
	front.target.Store(sinkURL(h.rcv.webhook)) // the sink is reachable: the one kept arrives
	require.Eventually(t, func() bool { return count(h.session(conv.ID()), "x.openhands.message.event") == 4 }, waitFor, tick)
	mustStatus(t, conv, oh.StatusRunning)
	mustStatus(t, conv, oh.StatusFinished)
	h.waitTypes(conv.ID(), "state.delta", "run.finished")

	var got []string
	for _, ev := range h.session(conv.ID()) {
		if ev.Type == "x.openhands.message.event" {
			got = append(got, ev.Data["vendor_event_id"].(string))
		}
	}
	assert.Equal(t, ids, got, "each once, in log order")
	assert.Zero(t, conv.Sockets())
	h.validate()
	h.assertEveryVendorEventOnce(conv)
}

// The socket's copy of an event the webhook brought first is dropped, yet
// it is the socket's progress: discovery must not take a socket that only
// delivers such copies for stalled, and a reconnect resumes after it.
func TestSocketCopyOfAPushedEventIsProgress(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Webhook.GetOrInsertDefault()
	c := offlineConversationWith(t, "pushed", cfg)
	ctx := context.Background()
	raw := historyEvent(0, 1)
	pushed, err := aep.DecodeValue(raw)
	require.NoError(t, err)
	c.takePushed(ctx, []any{pushed})
	require.Equal(t, uint64(0), c.session.storedCount(), "a pushed event is not the socket's progress")

	c.handleSessionFrame(ctx, []byte(`{"type":"durable","seq":0,"event":`+string(raw)+`}`))
	assert.Equal(t, uint64(1), c.session.storedCount())
	ev, err := mapping.DecodeEvent(raw)
	require.NoError(t, err)
	assert.Equal(t, ev.Timestamp(), c.session.resumeTS())
}

// A child's deletion pushed by the webhook stops it in its parent's
// session at once, without waiting for a poll.
func TestWebhookPushedChildDeletionStopsItInItsParent(t *testing.T) {
	stub, h := startPushOnly(t, socketSession)

	parent := createConversation(t, stub)
	action := mustAppend(t, parent, oh.StartChildAction("write the tests", "tests"))
	launch, err := parent.StartChild("write the tests", "tests")
	require.NoError(t, err)
	mustAppend(t, parent, oh.StartChildObservation(action, launch))
	started := h.waitFirst(parent.ID(), "delegation.subagent.started")

	child, ok := stub.Conversation(launch.ConversationID)
	require.True(t, ok)
	require.NoError(t, child.Delete())
	stopped := h.waitFirst(parent.ID(), "delegation.subagent.stopped")
	assert.Equal(t, started.ID, stopped.Cause)
	assert.Equal(t, "deleting", stopped.Data["status"])
}

// A webhook push carries no key, or a configured server's. A server with
// no key configured (config refuses one with webhook) must not take the
// pushes that carry none.
func TestWebhookEmptyKeyMatchesNoServer(t *testing.T) {
	keyed := &serverWatch{api: &serverClient{name: "keyed", key: testKey}}
	keyless := &serverWatch{api: &serverClient{name: "keyless"}}
	sink := &webhookSink{watches: []*serverWatch{keyless, keyed}}
	for _, tc := range []struct {
		name, key string
		want      *serverWatch
	}{
		{name: "configured key", key: testKey, want: keyed},
		{name: "no key", key: ""},
		{name: "other key", key: "not-" + testKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Same(t, tc.want, sink.serverOf(tc.key))
		})
	}
}

// A ConversationInfo older than the newest taken in is stale: the server
// posts each in a task of its own, so they arrive out of order.
func TestStaleMetadataIsIgnored(t *testing.T) {
	s := offlineConversation(t, "metadata").session
	s.noteMetadata(context.Background(), "2026-08-22T14:00:02Z", metadata{Title: json.RawMessage(`"newer"`)})
	s.noteMetadata(context.Background(), "2026-08-22T14:00:01Z", metadata{Title: json.RawMessage(`"older"`)})
	assert.Equal(t, `"newer"`, s.metadata.title)
}

// A pushed stored event is mapped ahead of the socket only when it extends
// what was processed: its parent was, or it is a root and nothing was,
// not even before a restart (the cursor is stored, the vendor ids are not).
func TestPushExtends(t *testing.T) {
	event := func(t *testing.T, id, parent string) mapping.Event {
		fields := map[string]any{"id": id, "kind": "MessageEvent", "source": "agent"}
		if parent != "" {
			fields["parent_id"] = parent
		}
		return eventOf(t, fields)
	}
	for _, tc := range []struct {
		name    string
		prepare func(s *session)
		parent  string
		want    bool
	}{
		{name: "root of a fresh session", prepare: func(*session) {}, want: true},
		{name: "root after a session socket's restart", prepare: func(s *session) { s.durable.Cursor.DurableSeq = 4 }},
		{name: "root after a legacy socket's restart", prepare: func(s *session) { s.durable.Cursor.ResumeTS = "2026-08-22T14:00:00.000000" }},
		{name: "root after an event", prepare: func(s *session) { s.vendorIDs.Put("p", "") }},
		{name: "child of a processed event", prepare: func(s *session) { s.vendorIDs.Put("p", "") }, parent: "p", want: true},
		{name: "child of an unseen event", prepare: func(*session) {}, parent: "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := offlineConversation(t, "extends").session
			tc.prepare(s)
			assert.Equal(t, tc.want, s.extends(event(t, "c", tc.parent)))
		})
	}
}
