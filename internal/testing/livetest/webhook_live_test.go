//go:build live

package livetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
)

// TestLiveWebhook proves the receiver's webhook sink against the real
// agent server, whose webhooks (config.py WebhookSpec, set by the OH_
// environment) POST to the collector through a counting pass-through. With
// sockets and webhook both on and a poll_interval of an hour, a new
// conversation is attached by push, long before any poll; a title renamed
// through the server's REST update becomes state.delta of the session; and
// every vendor event is emitted once, though both channels brought it.
func TestLiveWebhook(t *testing.T) {
	python, bin, llm := liveTools(t)
	sinkAddr, err := childproc.FreeAddr()
	require.NoError(t, err)
	hook := startHookTap(t, "http://"+sinkAddr)
	// A path prefix in base_url, as an operator's ingress might add; the
	// sink reads only the last segments. flush_delay 1 s: the default 30 s
	// would make the test wait for the pushed copies.
	server := startAgentServer(t, python,
		"OH_WEBHOOKS_0_BASE_URL="+hook.srv.URL+"/prefix",
		"OH_WEBHOOKS_0_FLUSH_DELAY=1",
		"OH_WEBHOOKS_0_RETRY_DELAY=1")

	rec, front := startRecordedFront(t, server.url)
	relay := aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken})
	// The relay takes a repeat of an event it holds as a redelivery; the
	// OTLP sink keeps every record the pipeline exported.
	sink := startOTLPSink(t)
	r := &receiverUnderTest{mode: "auto", level: aep.CaptureRedacted, rec: rec, front: front, relay: relay}
	col := startCollectorProcess(t, bin, receiverCollectorConfig(webhookReceiverYAML(r, sinkAddr), relay.URL(), "webhook", sink.URL()))
	logOnFailure(t, server, col)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The first poll (at start) finds nothing; the next is an hour away.
	require.NoError(t, poll(ctx, "the receiver's first poll", func() (bool, error) {
		return slices.ContainsFunc(rec.Transcript().REST, func(x Exchange) bool { return x.Path == searchPath && x.Status == http.StatusOK }), nil
	}))

	created := time.Now()
	id, err := server.createConversation(ctx, llm.BaseURL(), conversationSpec{script: "tools"})
	require.NoError(t, err)
	require.NoError(t, poll(ctx, "the receiver attached to the new conversation", func() (bool, error) {
		return rec.Attached(id) && slices.ContainsFunc(r.sessionEvents(id), func(ev *aep.Event) bool { return ev.Type == "session.started" }), nil
	}))
	attach := time.Since(created)
	t.Logf("time to attach by push: %s (poll_interval 1h)", attach.Round(time.Millisecond))
	// Well before any poll: the bound is slack for a loaded machine, not a target.
	assert.Less(t, attach, time.Minute, "the new conversation was attached by push")
	assert.Positive(t, hook.infos(id), "the server pushed the new conversation's ConversationInfo")

	require.NoError(t, server.sendMessage(ctx, id, "Please do the task. [[script:tools]]"))
	require.NoError(t, awaitStatus("finished")(ctx, &live{server: server}, id))

	const title = "webhook renamed"
	_, err = server.call(ctx, http.MethodPatch, "/api/conversations/"+id, map[string]any{"title": title}, nil)
	require.NoError(t, err)
	var rename *aep.Event
	require.NoError(t, poll(ctx, "the rename as state.delta", func() (bool, error) {
		for _, ev := range r.sessionEvents(id) {
			if ev.Type == "state.delta" && ev.Data["key"] == "title" {
				rename = ev
			}
		}
		return rename != nil, nil
	}))
	assert.Equal(t, []any{map[string]any{"op": "replace", "path": "/title", "value": title}}, rename.Data["delta"])

	// Both channels on: once every stored event was pushed too (flush_delay
	// after the last), each must still be emitted once.
	truth, err := server.events(ctx, id)
	require.NoError(t, err)
	require.NoError(t, poll(ctx, "every stored event pushed", func() (bool, error) {
		return len(hook.missing(truth)) == 0, nil
	}), "not pushed: %v", hook.missing(truth))
	var problems []string
	err = poll(ctx, "the stream to cover the log once", func() (bool, error) {
		problems = coverage(truth, r.sessionEvents(id), false)
		return len(problems) == 0, nil
	})
	assert.NoError(t, err, "the stream against the server's log:\n%s", strings.Join(problems, "\n"))
	// The OTLP exporter's batches may land out of order: there only the
	// count is checked, once the sink holds what the relay holds.
	relayed := len(r.sessionEvents(id))
	require.NoError(t, poll(ctx, "the OTLP sink to catch up with the relay", func() (bool, error) {
		return len(sessionOf(sink.events(r.label()), id)) >= relayed, nil
	}))
	assert.Empty(t, repeats(sessionOf(sink.events(r.label()), id)), "vendor events the OTLP sink got more than once")
	assert.Empty(t, sink.errors())
	assert.Empty(t, hook.refused(), "webhook POSTs the sink refused")
	for _, v := range relay.Violations() {
		t.Errorf("relay violation: %s", v)
	}
	assertReadOnly(t, rec.Transcript())
	require.True(t, col.Running(), "the collector exited:\n%s", tail(col.logText(), 4000))
	t.Logf("webhook POSTs: %d event batches, %d ConversationInfo", hook.batches(), hook.infos(id))
}

// sessionOf is the events of one session, in order.
func sessionOf(events []*aep.Event, id string) []*aep.Event {
	return slices.DeleteFunc(events, func(ev *aep.Event) bool { return ev.Session != id })
}

// repeats is each vendor event emitted more than once as the same AEP type.
func repeats(events []*aep.Event) []string {
	seen := map[string]int{}
	var out []string
	for _, ev := range events {
		vid, _ := ev.Data["vendor_event_id"].(string)
		if vid == "" {
			continue
		}
		if seen[vid+" "+ev.Type]++; seen[vid+" "+ev.Type] == 2 {
			out = append(out, ev.Type+" of "+vid)
		}
	}
	return out
}

// hookTap passes the agent server's webhook POSTs to the collector and
// keeps what they carried and how the sink answered.
type hookTap struct {
	srv    *httptest.Server
	target string
	client *http.Client

	mu      sync.Mutex
	pushed  map[string]bool // vendor event ids pushed and taken in (200)
	nInfos  map[string]int  // ConversationInfo POSTs taken in, by conversation id
	nBatch  int
	refusal []string
}

func startHookTap(tb testing.TB, target string) *hookTap {
	h := &hookTap{target: target, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}},
		pushed: map[string]bool{}, nInfos: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	tb.Cleanup(h.srv.Close)
	return h
}

func (h *hookTap) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/prefix")
	req, err := http.NewRequestWithContext(r.Context(), r.Method, h.target+"/prefix"+path, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := h.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h.note(r.Method+" "+path, resp.StatusCode, body)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// note keeps one POST the sink answered.
func (h *hookTap) note(what string, status int, body []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if status != http.StatusOK {
		h.refusal = append(h.refusal, fmt.Sprintf("%s: %d", what, status))
		return
	}
	switch {
	case strings.HasSuffix(what, " /conversations"):
		var info struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(body, &info) == nil {
			h.nInfos[info.ID]++
		}
	case strings.Contains(what, " /events/"):
		var batch []struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(body, &batch) == nil {
			h.nBatch++
			for _, ev := range batch {
				h.pushed[ev.ID] = true
			}
		}
	}
}

func (h *hookTap) infos(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nInfos[id]
}

func (h *hookTap) batches() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nBatch
}

func (h *hookTap) refused() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.refusal)
}

// missing is the stored events no push carried.
func (h *hookTap) missing(stored []map[string]any) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ev := range stored {
		if vid := fmt.Sprint(ev["id"]); !h.pushed[vid] {
			out = append(out, fmt.Sprintf("%s (%v)", vid, ev["kind"]))
		}
	}
	return out
}
