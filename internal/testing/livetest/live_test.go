//go:build live

package livetest

import (
	"context"
	"encoding/json"

	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/fakellm"
)

// secrets are planted in a tool's output (and the command that prints them).
var secrets = []string{"AKIAZ7Q3LIVETEST4K2M", "hunter2-live-s3cret", "ops-team@example.com"}

// receiverUnderTest is one receiver of one collector: its Front, the
// recorder behind it, and its relay.
type receiverUnderTest struct {
	mode  string
	level aep.Capture
	// hook is the webhook mode of a receiver the agent server pushes to
	// (hookSockets, hookOnly), "" for one without a webhook sink.
	hook  string
	rec   *Recorder
	front *Front
	relay *aeprelaytest.Relay
}

func (r *receiverUnderTest) label() string {
	if r.hook != "" {
		return r.hook + "-" + string(r.level)
	}
	return Label(r.mode, r.level)
}

// observes reports whether the receiver has taken up the conversation:
// its socket attached, or with webhook.only, its session started.
func (r *receiverUnderTest) observes(id string) bool {
	if r.hook == hookOnly {
		return slices.ContainsFunc(r.sessionEvents(id), func(ev *aep.Event) bool { return ev.Type == "session.started" })
	}
	return r.rec.Attached(id)
}

// sessionEvents is what the relay holds for one conversation, in order.
func (r *receiverUnderTest) sessionEvents(id string) []*aep.Event {
	var out []*aep.Event
	for _, rec := range r.relay.Events() {
		if rec.Event.Session == id {
			out = append(out, rec.Event)
		}
	}
	return out
}

// live is the whole rig.
type live struct {
	t         *testing.T
	server    *agentServer
	llm       *fakellm.Server
	receivers []*receiverUnderTest
	sinks     map[string]*otlpSink
	cols      []*collectorProcess

	mu       sync.Mutex
	names    map[string]string           // conversation id → script
	deleted  map[string][]map[string]any // the events of a conversation before it was deleted
	restarts []string
}

func TestLive(t *testing.T) {
	l := startLive(t, Modes)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	started := time.Now()

	// Phase 1: every scripted conversation at once.
	l.parallel(ctx, []scenario{
		{conversationSpec{script: "tools"}, []step{awaitStatus("finished")}},
		{conversationSpec{script: "long"}, []step{awaitStatus("finished")}},
		{conversationSpec{script: "confirm_accept", confirm: true}, []step{
			awaitStatus("waiting_for_confirmation"), respond(true), awaitStatus("finished"),
		}},
		// The real server goes waiting → idle, then persists the rejection;
		// the next message opens a new run.
		{conversationSpec{script: "confirm_reject", confirm: true}, []step{
			awaitStatus("waiting_for_confirmation"), respond(false), awaitStatus("idle"),
			awaitEvent("UserRejectObservation", ""), say("Fine, leave the files alone then."), awaitStatus("finished"),
		}},
		{conversationSpec{script: "interrupt"}, []step{
			awaitEvent("ActionEvent", "sleep 30"), post("/interrupt"), awaitStatus("paused"),
			say("Go on, but skip the sleep."), awaitStatus("finished"),
		}},
		{conversationSpec{script: "stream", stream: true}, []step{awaitStatus("finished")}},
		{conversationSpec{script: "llm_error"}, []step{awaitStatus("error")}},
		{conversationSpec{script: "delete"}, []step{awaitEvent("ActionEvent", "sleep 30"), deleteConversation}},
	})
	t.Logf("phase 1 (8 conversations) took %s", time.Since(started).Round(time.Second))
	// Phase 2: the agent server restarts (SIGTERM) in the middle of a run.
	phase2 := time.Now()
	l.parallel(ctx, []scenario{
		{conversationSpec{script: "restart"}, []step{
			// SIGTERM pauses the run; should the command beat the restart,
			// the run has finished instead.
			awaitEvent("ActionEvent", "sleep 6"), restartServer, awaitStatus("paused", "finished"),
			say("You were restarted; please finish."), awaitStatus("finished"),
		}},
	})
	t.Logf("phase 2 (restart mid-run) took %s", time.Since(phase2).Round(time.Second))

	for _, c := range l.cols {
		require.True(t, c.Running(), "a collector exited:\n%s", tail(c.logText(), 4000))
	}
	l.assertAll(ctx)
	if dir := os.Getenv("LIVE_RECORD"); dir != "" && !t.Failed() {
		l.record(dir)
	}
}

// The webhook modes of the receivers the agent server pushes to: sockets
// and webhook, and webhook only. Both poll once an hour, so what they show
// came by push, or from their sockets.
const (
	hookSockets = "webhook"
	hookOnly    = "webhook_only"
	// hookFlushDelay is the server's flush_delay for them, in seconds: the
	// default 30 s would make the test wait for every pushed batch.
	hookFlushDelay = 2
)

// startLive starts the rig: the fake LLM, the agent server, and per socket
// mode a collector whose receivers (one per capture level) each reach the
// server through their own Front and push to their own relay; and per
// webhook mode in hooks a collector with one receiver at redacted, which
// the server's webhooks push to.
func startLive(t *testing.T, modes []string, hooks ...string) *live {
	python, bin, llm := liveTools(t)
	var env []string
	sinkAddrs := make([]string, len(hooks))
	for i := range hooks {
		addr, err := childproc.FreeAddr()
		require.NoError(t, err)
		sinkAddrs[i] = addr
		env = append(env, fmt.Sprintf("OH_WEBHOOKS_%d_BASE_URL=http://%s", i, addr),
			fmt.Sprintf("OH_WEBHOOKS_%d_FLUSH_DELAY=%d", i, hookFlushDelay), fmt.Sprintf("OH_WEBHOOKS_%d_RETRY_DELAY=1", i))
	}
	l := &live{t: t, llm: llm, server: startAgentServer(t, python, env...), sinks: map[string]*otlpSink{},
		names: map[string]string{}, deleted: map[string][]map[string]any{}}
	for i, hook := range hooks {
		rec, front := startRecordedFront(t, l.server.url)
		relay := aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken})
		r := &receiverUnderTest{mode: "auto", level: aep.CaptureRedacted, hook: hook, rec: rec, front: front, relay: relay}
		l.receivers = append(l.receivers, r)
		sink := startOTLPSink(t)
		l.sinks[hook] = sink
		l.cols = append(l.cols, startCollectorProcess(t, bin,
			receiverCollectorConfig(webhookReceiverYAML(r, sinkAddrs[i]), relay.URL(), r.label(), sink.URL())))
	}
	for _, mode := range modes {
		fronts, relays := map[aep.Capture]string{}, map[aep.Capture]string{}
		for _, level := range Levels {
			rec, front := startRecordedFront(t, l.server.url)
			relay := aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken})
			l.receivers = append(l.receivers, &receiverUnderTest{mode: mode, level: level, rec: rec, front: front, relay: relay})
			fronts[level], relays[level] = front.ProxyURL(), relay.URL()
		}
		sink := startOTLPSink(t)
		l.sinks[mode] = sink
		l.cols = append(l.cols, startCollectorProcess(t, bin, collectorConfig(mode, fronts, relays, sink.URL())))
	}
	logOnFailure(t, l.server, l.cols...)
	return l
}

// liveTools is what every live test needs: the virtualenv's python, the
// built collector, and the fake LLM playing testdata/scripts.
func liveTools(t *testing.T) (python, bin string, llm *fakellm.Server) {
	python, bin = os.Getenv("OH_PYTHON"), os.Getenv("OTELCOL_BIN")
	if python == "" || bin == "" {
		t.Fatal("OH_PYTHON and OTELCOL_BIN must name the virtualenv's python and the built collector (make live-test sets both)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("collector binary: %v (run make build)", err)
	}
	scripts, err := fakellm.LoadScripts("testdata/scripts")
	require.NoError(t, err)
	llm, err = fakellm.Start(scripts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = llm.Close() })
	return python, bin, llm
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// scenario is one scripted conversation: how it is created, then what the
// test does to it, step by step, after its first message.
type scenario struct {
	spec  conversationSpec
	steps []step
}

// step is one thing the test does to, or waits for in, a conversation.
type step func(ctx context.Context, l *live, id string) error

// parallel plays the scenarios concurrently and fails the test on any error.
func (l *live) parallel(ctx context.Context, scenarios []scenario) {
	var wg sync.WaitGroup
	errs := make(chan error, len(scenarios))
	for _, sc := range scenarios {
		wg.Go(func() {
			id, err := l.open(ctx, sc.spec)
			for i := 0; err == nil && i < len(sc.steps); i++ {
				err = sc.steps[i](ctx, l, id)
			}
			if err != nil {
				errs <- fmt.Errorf("scenario %s: %w", sc.spec.script, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		l.t.Error(err)
	}
	if l.t.Failed() {
		l.t.FailNow()
	}
}

// open creates a conversation, waits until every receiver has attached to
// it (so all of them see the same live frames), and sends its first
// message naming the script.
func (l *live) open(ctx context.Context, spec conversationSpec) (string, error) {
	id, err := l.server.createConversation(ctx, l.llm.BaseURL(), spec)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	l.names[id] = spec.script
	l.mu.Unlock()
	if err := poll(ctx, "every receiver attached to "+spec.script, func() (bool, error) {
		for _, r := range l.receivers {
			if !r.observes(id) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return "", err
	}
	return id, l.server.sendMessage(ctx, id, "Please do the task. [[script:"+spec.script+"]]")
}

// poll calls cond every 100 ms until it holds, fails, or ctx ends.
func poll(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitStatus waits until the conversation's execution_status is one of
// want.
func awaitStatus(want ...string) step {
	return func(ctx context.Context, l *live, id string) error {
		return poll(ctx, "status "+strings.Join(want, "|"), func() (bool, error) {
			s, err := l.server.status(ctx, id)
			return slices.Contains(want, s), err
		})
	}
}

// awaitEvent waits until the conversation has persisted an event of kind
// whose JSON contains text.
func awaitEvent(kind, text string) step {
	return func(ctx context.Context, l *live, id string) error {
		return poll(ctx, kind+" "+text, func() (bool, error) {
			evs, err := l.server.events(ctx, id)
			return slices.ContainsFunc(evs, func(ev map[string]any) bool {
				raw, _ := json.Marshal(ev)
				return ev["kind"] == kind && strings.Contains(string(raw), text)
			}), err
		})
	}
}

// say sends a user message and runs the agent.
func say(text string) step {
	return func(ctx context.Context, l *live, id string) error {
		return l.server.sendMessage(ctx, id, text)
	}
}

// post calls a conversation's control endpoint, e.g. /interrupt.
func post(path string) step {
	return func(ctx context.Context, l *live, id string) error {
		_, err := l.server.call(ctx, "POST", "/api/conversations/"+id+path, nil, nil)
		return err
	}
}

// respond accepts or rejects the pending action.
func respond(accept bool) step {
	return func(ctx context.Context, l *live, id string) error {
		body := map[string]any{"accept": accept}
		if !accept {
			body["reason"] = "not on this machine"
		}
		_, err := l.server.call(ctx, "POST", "/api/conversations/"+id+"/events/respond_to_confirmation", body, nil)
		return err
	}
}

// deleteConversation deletes the conversation while the receivers are
// attached, keeping its log for the coverage check, and waits until every
// receiver has ended the session.
func deleteConversation(ctx context.Context, l *live, id string) error {
	evs, err := l.server.events(ctx, id)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.deleted[id] = evs
	l.mu.Unlock()
	if _, err := l.server.call(ctx, "DELETE", "/api/conversations/"+id, nil, nil); err != nil {
		return err
	}
	return poll(ctx, "every receiver ended the deleted session", func() (bool, error) {
		for _, r := range l.receivers {
			if !slices.ContainsFunc(r.sessionEvents(id), func(ev *aep.Event) bool { return ev.Type == "session.ended" }) {
				return false, nil
			}
		}
		return true, nil
	})
}

// restartServer restarts the agent server (SIGTERM, then a new process on
// the same state) and points every Front at it.
func restartServer(_ context.Context, l *live, id string) error {
	l.mu.Lock()
	l.restarts = append(l.restarts, id)
	l.mu.Unlock()
	if err := l.server.restart(); err != nil {
		return err
	}
	for _, r := range l.receivers {
		if err := r.rec.SetUpstream(l.server.url); err != nil {
			return err
		}
	}
	return nil
}

// assertAll waits until every receiver has caught up, then checks
// everything the issue asks of the stream.
func (l *live) assertAll(ctx context.Context) {
	t := l.t
	truth := map[string][]map[string]any{}
	for id := range l.names {
		if evs, ok := l.deleted[id]; ok {
			truth[id] = evs
			continue
		}
		evs, err := l.server.events(ctx, id)
		require.NoError(t, err)
		truth[id] = evs
	}
	for id, evs := range truth {
		if l.names[id] != "llm_error" && l.deleted[id] == nil {
			assert.Positive(t, promptTokens(evs), "the fake LLM's usage reaches the stats of %s", l.names[id])
		}
	}
	var last []string
	err := poll(ctx, "every receiver to cover every conversation", func() (bool, error) {
		last = nil
		for _, r := range l.receivers {
			if r.level == aep.CaptureNone {
				continue
			}
			for id, evs := range truth {
				if problems := coverage(evs, r.sessionEvents(id), l.deleted[id] != nil); len(problems) > 0 {
					last = append(last, fmt.Sprintf("%s %s: %s", r.label(), l.names[id], strings.Join(problems, "; ")))
				}
			}
		}
		return len(last) == 0, nil
	})
	if err != nil {
		t.Errorf("coverage:\n%s", strings.Join(last, "\n"))
	}
	time.Sleep(time.Second) // the last batches reach the OTLP sinks

	for _, r := range l.receivers {
		t.Run(r.label(), func(t *testing.T) {
			for _, v := range r.relay.Violations() {
				t.Errorf("relay violation: %s", v)
			}
			l.assertOTLP(t, r)
			assertReadOnly(t, r.rec.Transcript())
			assertSecrets(t, r)
			if r.level == aep.CaptureNone {
				return
			}
			for id, evs := range truth {
				if l.deleted[id] != nil {
					continue
				}
				got, want := lifecycle(r.sessionEvents(id)), expectedLifecycle(evs)
				assert.Equal(t, want, got, "runs and attention of %s follow the server's execution_status history", l.names[id])
				if tokens, ok := runInputTokens(r.sessionEvents(id)); ok {
					assert.Equal(t, promptTokens(evs), float64(tokens),
						"the input tokens on the runs of %s add up to the server's stats (the fake LLM's usage)", l.names[id])
				}
			}
			if r.mode != "events" {
				for _, id := range l.restarts {
					assertResumedByAfterSeq(t, r.rec.Transcript(), id)
				}
			}
		})
	}
}

// coverage compares a session's AEP stream with the server's event log:
// every server event appears once per AEP type it maps to, in the
// server's order, and nothing names a vendor event the server lacks but
// the connect snapshots and the streaming deltas. A deleted conversation's
// log was read before the deletion, so events after it are allowed.
func coverage(server []map[string]any, stream []*aep.Event, deleted bool) []string {
	var problems []string
	pos := map[string]int{}
	for i, ev := range server {
		pos[fmt.Sprint(ev["id"])] = i
	}
	seen := map[string]int{}
	var order []string
	for _, ev := range stream {
		vid, _ := ev.Data["vendor_event_id"].(string)
		if vid == "" {
			continue
		}
		if _, ok := pos[vid]; !ok {
			if ev.Type != "state.snapshot" && ev.Type != "x.openhands.streaming.delta" && !deleted {
				problems = append(problems, fmt.Sprintf("%s names vendor event %s the server does not list", ev.Type, vid))
			}
			continue
		}
		if seen[vid+" "+ev.Type]++; seen[vid+" "+ev.Type] == 2 {
			problems = append(problems, fmt.Sprintf("vendor event %s emitted twice as %s", vid, ev.Type))
		}
		if !slices.Contains(order, vid) {
			order = append(order, vid)
		}
	}
	for i := 1; i < len(order); i++ {
		if pos[order[i]] < pos[order[i-1]] {
			problems = append(problems, fmt.Sprintf("vendor event %s emitted after %s, which the server lists later", order[i], order[i-1]))
		}
	}
	for _, ev := range server {
		vid := fmt.Sprint(ev["id"])
		if ev["kind"] != "TokenEvent" && !slices.Contains(order, vid) {
			problems = append(problems, fmt.Sprintf("server event %s (%v) never emitted", vid, ev["kind"]))
		}
	}
	return problems
}

// promptTokens is the accumulated prompt tokens of the last stats update.
func promptTokens(server []map[string]any) float64 {
	var tokens float64
	for _, ev := range server {
		if ev["kind"] != "ConversationStateUpdateEvent" || ev["key"] != "stats" {
			continue
		}
		raw, _ := json.Marshal(ev["value"])
		var stats struct {
			Usage map[string]struct {
				Tokens struct {
					Prompt float64 `json:"prompt_tokens"`
				} `json:"accumulated_token_usage"`
			} `json:"usage_to_metrics"`
		}
		_ = json.Unmarshal(raw, &stats)
		tokens = 0
		for _, u := range stats.Usage {
			tokens += u.Tokens.Prompt
		}
	}
	return tokens
}

// moment is one lifecycle event: its class and the vendor event behind it.
type moment struct{ kind, vendorID string }

// lifecycle extracts run and attention events from a session.
func lifecycle(stream []*aep.Event) []moment {
	var out []moment
	for _, ev := range stream {
		vid, _ := ev.Data["vendor_event_id"].(string)
		switch ev.Type {
		case "run.started", "attention.requested", "attention.resolved":
			out = append(out, moment{ev.Type, vid})
		case "run.finished", "run.failed", "run.cancelled":
			out = append(out, moment{"run.terminal", vid})
		}
	}
	return out
}

// expectedLifecycle is the design record's run and attention model over
// the server's execution_status history, written independently of the
// mapper: a run is under way at running, paused and waiting; a closed
// status ends it; waiting asks for attention and leaving it resolves.
func expectedLifecycle(server []map[string]any) []moment {
	var out []moment
	prev, open, asking := "", false, false
	for _, ev := range server {
		if ev["kind"] != "ConversationStateUpdateEvent" || ev["key"] != "execution_status" {
			continue
		}
		next, _ := ev["value"].(string)
		vid := fmt.Sprint(ev["id"])
		if next == prev {
			continue
		}
		if asking && next != "waiting_for_confirmation" {
			out, asking = append(out, moment{"attention.resolved", vid}), false
		}
		switch next {
		case "running", "waiting_for_confirmation":
			if !open {
				out, open = append(out, moment{"run.started", vid}), true
			}
			if next == "waiting_for_confirmation" {
				out, asking = append(out, moment{"attention.requested", vid}), true
			}
		case "idle", "finished", "error", "stuck":
			if open {
				out, open = append(out, moment{"run.terminal", vid}), false
			}
		}
		prev = next
	}
	return out
}

// assertOTLP: the OTLP sink holds the relay's events as log records.
func (l *live) assertOTLP(t *testing.T, r *receiverUnderTest) {
	sink := l.sinks[r.mode]
	assert.Empty(t, sink.errors())
	ids := func(evs []*aep.Event) []string {
		out := make([]string, 0, len(evs))
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	// The two exporters deliver on their own schedules: an event emitted
	// late (a reconnect's snapshot) may reach one before the other, so
	// they are compared once they agree or the wait runs out.
	var relayed, logged []*aep.Event
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		relayed = relayed[:0]
		for _, rec := range r.relay.Events() {
			relayed = append(relayed, rec.Event)
		}
		logged = sink.events(r.label())
		if slices.Equal(ids(relayed), ids(logged)) || time.Now().After(deadline) {
			break
		}
	}
	for _, ev := range logged {
		require.NoError(t, schema.Validate(ev), "OTLP record %s %s", ev.Type, ev.ID)
	}
	assert.Equal(t, ids(relayed), ids(logged), "the OTLP sink holds the relay's events")
}

// assertReadOnly: auth frames are all the receiver writes to a socket, and
// GET is its only REST verb.
func assertReadOnly(t *testing.T, tr *Transcript) {
	assertGETOnly(t, tr)
	frames := 0
	for _, s := range tr.Sockets {
		for _, f := range s.FromReceiver {
			frames++
			var auth struct {
				Type string `json:"type"`
				Key  string `json:"session_api_key"`
			}
			if err := json.Unmarshal(f, &auth); err != nil || auth.Type != "auth" || auth.Key != SessionKey {
				t.Errorf("the receiver wrote a frame that is not an auth frame to %s: %s", s.Path, f)
			}
		}
	}
	assert.NotZero(t, frames, "the receiver authenticated its sockets")
}

// assertGETOnly: GET is the receiver's only REST verb.
func assertGETOnly(t *testing.T, tr *Transcript) {
	for _, ex := range tr.REST {
		assert.Equal(t, "GET", ex.Method, "%s %s", ex.Method, ex.Path)
	}
}

// assertSecrets: the planted secrets never leave below full, and at
// redacted the tool output still rides, redacted.
func assertSecrets(t *testing.T, r *receiverUnderTest) {
	var all strings.Builder
	for _, rec := range r.relay.Events() {
		all.Write(rec.Raw)
	}
	text := all.String()
	for _, s := range secrets {
		if r.level == aep.CaptureFull {
			assert.Contains(t, text, s, "full carries the tool output verbatim")
		} else {
			assert.NotContains(t, text, s)
		}
	}
	if r.level == aep.CaptureRedacted {
		assert.Contains(t, text, capture.SecretMarker)
		assert.Contains(t, text, capture.PIIMarker)
	}
}

// assertResumedByAfterSeq: after the restart, the session socket resumed
// from the last durable seq it had seen.
func assertResumedByAfterSeq(t *testing.T, tr *Transcript, id string) {
	lastSeq, sockets := int64(-1), 0
	for _, s := range tr.Sockets {
		if conversationOf(s.Path) != id || !strings.HasPrefix(s.Path, "/sockets/session/") {
			continue
		}
		q, err := url.ParseQuery(s.Query)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(lastSeq), q.Get("after_seq"), "socket %d of the restarted conversation", sockets)
		sockets++
		for _, f := range s.FromServer {
			var d struct {
				Type string `json:"type"`
				Seq  int64  `json:"seq"`
			}
			if json.Unmarshal(f, &d) == nil && d.Type == "durable" {
				lastSeq = max(lastSeq, d.Seq)
			}
		}
	}
	assert.GreaterOrEqual(t, sockets, 2, "the restart forced a reconnect")
}

// record saves, for each recorded mode and level, what crossed the Front
// and the AEP stream the receiver emitted.
func (l *live) record(dir string) {
	t := l.t
	require.NoError(t, os.RemoveAll(dir))
	for _, r := range l.receivers {
		if !slices.Contains(Recorded, r.mode) {
			continue
		}
		sub := filepath.Join(dir, r.label())
		require.NoError(t, os.MkdirAll(sub, 0o755))
		require.NoError(t, r.rec.Transcript().Save(filepath.Join(sub, "transcript.json.gz")))
		var evs []*aep.Event
		for _, rec := range r.relay.Events() {
			evs = append(evs, rec.Event)
		}
		require.NoError(t, SaveStream(filepath.Join(sub, "aep.jsonl.gz"), evs))
	}
	var lines []string
	for id, name := range l.names {
		lines = append(lines, name+" "+id+"\n")
	}
	slices.Sort(lines)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "conversations.txt"), []byte(strings.Join(lines, "")), 0o644))
	t.Logf("recorded into %s", dir)
}
