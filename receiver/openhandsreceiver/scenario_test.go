package openhandsreceiver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

const (
	waitFor = 15 * time.Second
	tick    = 5 * time.Millisecond
	testKey = "stub-session-key"
)

// statusHost records the component status the receiver reports, and
// offers extensions.
type statusHost struct {
	component.Host
	extensions map[component.ID]component.Component
	mu         sync.Mutex
	events     []*componentstatus.Event
}

func (h *statusHost) GetExtensions() map[component.ID]component.Component { return h.extensions }

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *statusHost) last() componentstatus.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return componentstatus.StatusNone
	}
	return h.events[len(h.events)-1].Status()
}

// harness is one receiver against stub agent servers, with its output.
type harness struct {
	t    *testing.T
	sink *consumertest.LogsSink
	host *statusHost
	tel  *componenttest.Telemetry
	rcv  *openhandsReceiver
}

// metric sums the data points of an internal counter or gauge whose
// attribute key=value (all points when key is "").
func (h *harness) metric(name, key, value string) int64 {
	h.t.Helper()
	m, err := h.tel.GetMetric(name)
	if err != nil {
		return 0
	}
	var total int64
	switch data := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range data.DataPoints {
			if v, ok := dp.Attributes.Value(attribute.Key(key)); key == "" || (ok && v.AsString() == value) {
				total += dp.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, dp := range data.DataPoints {
			if v, ok := dp.Attributes.Value(attribute.Key(key)); key == "" || (ok && v.AsString() == value) {
				total += dp.Value
			}
		}
	default:
		h.t.Fatalf("metric %s is a %T, not an int64 sum or gauge", name, m.Data)
	}
	return total
}

// bothSockets runs a scenario once per conversation socket: the legacy
// /sockets/events (REST history + live buffer) and /sockets/session.
func bothSockets(t *testing.T, run func(t *testing.T, socket string)) {
	for _, socket := range []string{socketEvents, socketSession} {
		t.Run(socket, func(t *testing.T) { run(t, socket) })
	}
}

// endpointOf is the stub endpoint a socket mode attaches to.
func endpointOf(socket string) oh.Endpoint {
	if socket == socketSession {
		return oh.EndpointSession
	}
	return oh.EndpointEvents
}

func fastConfig(socket string, servers ...*oh.Server) *Config {
	cfg := createDefaultConfig().(*Config)
	for _, s := range servers {
		sc := ServerConfig{SessionAPIKey: testKey, Socket: socket}
		sc.Endpoint = s.URL()
		cfg.Servers = append(cfg.Servers, sc)
	}
	cfg.PollInterval = 50 * time.Millisecond
	cfg.Reconnect = backoff.Config{InitialInterval: 10 * time.Millisecond, MaxInterval: 100 * time.Millisecond, Jitter: 0.2}
	return cfg
}

func startStub(t *testing.T) *oh.Server {
	return oh.Start(t, oh.Config{SessionAPIKeys: []string{testKey}})
}

func startHarness(t *testing.T, cfg *Config) *harness {
	t.Helper()
	return startHarnessWith(t, cfg, nil)
}

// startHarnessWith starts a receiver on a host with these extensions.
func startHarnessWith(t *testing.T, cfg *Config, extensions map[component.ID]component.Component) *harness {
	t.Helper()
	return startHarnessLogging(t, cfg, extensions, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
}

// startHarnessLogging is startHarnessWith with the receiver logging to logger.
func startHarnessLogging(t *testing.T, cfg *Config, extensions map[component.ID]component.Component, logger *zap.Logger) *harness {
	t.Helper()
	return startHarnessSockets(t, cfg, extensions, logger, defaultSocketSettings)
}

// startHarnessSockets is startHarnessLogging with the conversation sockets
// read under sockets.
func startHarnessSockets(t *testing.T, cfg *Config, extensions map[component.ID]component.Component, logger *zap.Logger, sockets socketSettings) *harness {
	t.Helper()
	require.NoError(t, cfg.Validate())
	host := &statusHost{Host: componenttest.NewNopHost(), extensions: extensions}
	h := &harness{t: t, sink: new(consumertest.LogsSink), host: host, tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) })
	set := receivertest.NewNopSettings(componentType)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	set.Logger = logger
	r, err := NewFactory().CreateLogs(context.Background(), set, cfg, h.sink)
	require.NoError(t, err)
	h.rcv = r.(*openhandsReceiver)
	sockets.frames = h.rcv.sockets.frames
	h.rcv.sockets = sockets
	require.NoError(t, r.Start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
	return h
}

// events decodes every emitted log record back into its AEP event, in
// emission order.
func (h *harness) events() []*aep.Event {
	return aeptest.EventsOf(h.t, h.sink.AllLogs()...)
}

func (h *harness) session(id string) []*aep.Event {
	var out []*aep.Event
	for _, ev := range h.events() {
		if ev.Session == id {
			out = append(out, ev)
		}
	}
	return out
}

func types(evs []*aep.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// waitTypes waits until the session's emitted types end with want.
// Connect-time state.snapshot events (one per connection, emitted after
// the history they predate) are ignored unless want names them.
func (h *harness) waitTypes(session string, want ...string) []*aep.Event {
	h.t.Helper()
	keepSnapshots := slices.Contains(want, "state.snapshot")
	deadline := time.Now().Add(waitFor)
	for {
		got := h.session(session)
		ts := types(got)
		if !keepSnapshots {
			ts = slices.DeleteFunc(ts, func(t string) bool { return t == "state.snapshot" })
		}
		if len(ts) >= len(want) && slices.Equal(ts[len(ts)-len(want):], want) {
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("session %s emitted %v, want it to end with %v", session, types(got), want)
		}
		time.Sleep(tick)
	}
}

// validate checks every emitted event against the schemas and the whole
// stream against the AEP stream rules, and that no AEP id repeats.
func (h *harness) validate() {
	h.t.Helper()
	var checker stream.Checker
	ids := map[string]bool{}
	for _, ev := range h.events() {
		require.NoError(h.t, schema.Validate(ev), "%s %s", ev.Type, ev.ID)
		require.NoError(h.t, checker.Add(ev), "%s %s", ev.Type, ev.ID)
		key := ev.Source + " " + ev.ID
		require.False(h.t, ids[key], "AEP id %s emitted twice", ev.ID)
		ids[key] = true
	}
}

// assertEveryVendorEventOnce checks that each persisted vendor event of
// conv (TokenEvent aside) produced AEP output exactly once.
func (h *harness) assertEveryVendorEventOnce(conv *oh.Conversation) {
	h.t.Helper()
	primary := map[string]int{} // vendor id → AEP events whose first output it is
	seen := map[string]bool{}
	for _, ev := range h.session(conv.ID()) {
		vid, _ := ev.Data["vendor_event_id"].(string)
		if vid == "" || seen[vid+" "+ev.Type] {
			assert.False(h.t, vid != "" && seen[vid+" "+ev.Type], "vendor event %s mapped to %s twice", vid, ev.Type)
			continue
		}
		seen[vid+" "+ev.Type] = true
		primary[vid]++
	}
	for _, ve := range conv.Events() {
		if ve.Kind() == oh.KindTokenEvent {
			continue
		}
		assert.NotZero(h.t, primary[ve.ID()], "vendor event %s (%s) never emitted", ve.ID(), ve.Kind())
	}
}

// waitLive waits until the conversation's n-th connection has drained its
// history: its connect-time snapshot is emitted after the history, so from
// then on frames are handled in arrival order.
func (h *harness) waitLive(conv *oh.Conversation, n int) {
	h.t.Helper()
	deadline := time.Now().Add(waitFor)
	for count(h.session(conv.ID()), "state.snapshot") < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("conversation %s never went live (connection %d)", conv.ID(), n)
		}
		time.Sleep(tick)
	}
}

func mustAppend(t *testing.T, c *oh.Conversation, ev oh.Event) oh.Event {
	t.Helper()
	out, err := c.Append(ev)
	require.NoError(t, err)
	return out
}

func mustStatus(t *testing.T, c *oh.Conversation, status string) {
	t.Helper()
	_, err := c.SetStatus(status)
	require.NoError(t, err)
}

// watchNew starts a receiver on socket watching a new conversation of
// stub, and returns once the conversation is attached.
func watchNew(t *testing.T, stub *oh.Server, socket string) (*oh.Conversation, *harness) {
	t.Helper()
	conv := createConversation(t, stub)
	h := startHarness(t, fastConfig(socket, stub))
	h.waitLive(conv, 1)
	return conv, h
}

// watchRunning is watchNew, the conversation then set running.
func watchRunning(t *testing.T, stub *oh.Server, socket string) (*oh.Conversation, *harness) {
	t.Helper()
	conv, h := watchNew(t, stub, socket)
	mustStatus(t, conv, oh.StatusRunning)
	return conv, h
}

// steppingClock is a server clock that reads start plus step more at each
// reading.
func steppingClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	n := 0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n++
		return start.Add(time.Duration(n) * step)
	}
}

func createConversation(t *testing.T, s *oh.Server) *oh.Conversation {
	t.Helper()
	c, err := s.CreateConversation(oh.ConversationOptions{})
	require.NoError(t, err)
	return c
}

func waitSockets(t *testing.T, c *oh.Conversation, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, c.WaitSockets(ctx, n), "conversation %s: want %d sockets", c.ID(), n)
}

func TestApprovalLoopAndIsErrorSplit(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv := createConversation(t, stub)
		h := startHarness(t, fastConfig(socket, stub))
		h.waitTypes(conv.ID(), "session.started", "state.snapshot")
		h.waitLive(conv, 1)

		_, err := conv.SendUserMessage("list the files", false)
		require.NoError(t, err)
		mustStatus(t, conv, oh.StatusRunning)
		act := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{Action: map[string]any{"kind": "TerminalAction", "command": "ls"}, SecurityRisk: "LOW"}))
		mustAppend(t, conv, oh.ObservationEvent(act, "README.md", false))
		act2 := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{Action: map[string]any{"kind": "TerminalAction", "command": "rm -rf /tmp/x"}}))
		mustStatus(t, conv, oh.StatusWaitingForConfirmation)
		mustStatus(t, conv, oh.StatusRunning)
		mustAppend(t, conv, oh.ObservationEvent(act2, "permission denied", true))
		mustStatus(t, conv, oh.StatusFinished)

		got := h.waitTypes(conv.ID(),
			"x.openhands.message.event", "state.delta", // last_user_message_id
			"run.started", "state.delta",
			"tool.requested", "tool.completed", "tool.requested",
			"state.delta", "attention.requested",
			"state.delta", "attention.resolved",
			"tool.failed",
			"state.delta", "run.finished")
		byType := map[string]*aep.Event{}
		for _, ev := range got {
			byType[ev.Type] = ev
		}
		req, res := byType["attention.requested"], byType["attention.resolved"]
		assert.Equal(t, map[string]any{
			"kind": "permission", "prompt": "Awaiting confirmation for a pending action",
			"vendor_ts": req.Data["vendor_ts"], "vendor_event_id": req.Data["vendor_event_id"],
		}, req.Data, "read-only: no options, no respond path")
		assert.Equal(t, aep.SeverityNotice, req.Severity)
		assert.Equal(t, req.ID, res.Subject)
		assert.Equal(t, "answered", res.Data["resolution"])
		assert.Equal(t, "run:"+conv.ID()+":1", byType["tool.failed"].Run)
		assert.Equal(t, map[string]any{"type": "tool_error"}, byType["tool.failed"].Data["error"])
		assert.Equal(t, fmt.Sprintf("aep://%s/agent/openhands/session/%s?epoch=%d", stub.Addr(), conv.ID(), *got[0].Epoch), got[0].Source,
			"the source names the conversation's generation")

		h.validate()
		h.assertEveryVendorEventOnce(conv)
		assertReadOnly(t, stub)
	})
}

// assertReadOnly proves the receiver's write posture from the stub's own
// records: every REST request a GET, every inbound socket frame an auth frame.
func assertReadOnly(t *testing.T, stub *oh.Server) {
	t.Helper()
	assert.Empty(t, stub.Writes(), "the receiver must not write over REST")
	for _, r := range stub.Requests() {
		assert.Equal(t, "GET", r.Method, r.Path)
	}
	frames := stub.InboundFrames()
	assert.NotEmpty(t, frames, "the auth frame is recorded")
	for _, f := range frames {
		assert.True(t, f.IsAuth(), "inbound frame %q is not an auth frame", f.Data)
	}
}

func TestTerminalStatuses(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		for _, tc := range []struct {
			status string
			want   []string
		}{
			{oh.StatusFinished, []string{"state.delta", "run.finished"}},
			{oh.StatusError, []string{"state.delta", "run.failed"}},
			{oh.StatusStuck, []string{"state.delta", "run.failed"}},
			{oh.StatusIdle, []string{"state.delta", "run.finished"}},
		} {
			t.Run(tc.status, func(t *testing.T) {
				stub := startStub(t)
				conv, h := watchRunning(t, stub, socket)
				mustStatus(t, conv, tc.status)
				got := h.waitTypes(conv.ID(), tc.want...)
				terminal := last(got, tc.want[1])
				assert.Equal(t, "run:"+conv.ID()+":1", terminal.Run)
				switch tc.status {
				case oh.StatusError, oh.StatusStuck:
					assert.Equal(t, tc.status, terminal.Data["reason"])
				case oh.StatusIdle:
					assert.Equal(t, "idle", terminal.Data["reason"])
				}
				h.validate()
			})
		}

		t.Run("deleted with pending attention", func(t *testing.T) {
			stub := startStub(t)
			conv, h := watchRunning(t, stub, socket)
			mustStatus(t, conv, oh.StatusWaitingForConfirmation)
			h.waitTypes(conv.ID(), "state.delta", "attention.requested")
			require.NoError(t, conv.Delete())
			got := h.waitTypes(conv.ID(), "attention.resolved", "run.cancelled", "session.ended")
			assert.Equal(t, "dismissed", last(got, "attention.resolved").Data["resolution"])
			assert.Equal(t, "killed", last(got, "session.ended").Data["reason"])
			h.validate()
			assert.Eventually(t, func() bool { return conv.Sockets() == 0 }, waitFor, tick, "the socket is released")
		})
	})
}

func TestDeltasOffThenOn(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		for _, deltas := range []bool{false, true} {
			t.Run(fmt.Sprintf("deltas=%v", deltas), func(t *testing.T) {
				stub := startStub(t)
				conv := createConversation(t, stub)
				cfg := fastConfig(socket, stub)
				cfg.Deltas = deltas
				h := startHarness(t, cfg)
				h.waitLive(conv, 1)
				mustStatus(t, conv, oh.StatusRunning)
				_, err := conv.StreamAgentMessage("Hel", "lo")
				require.NoError(t, err)
				mustAppend(t, conv, oh.TokenEvent([]int{1, 2}, []int{3}))
				mustStatus(t, conv, oh.StatusFinished)
				got := h.waitTypes(conv.ID(), "state.delta", "run.finished")
				deltaCount := 0
				for _, ev := range got {
					if ev.Type == "x.openhands.streaming.delta" {
						deltaCount++
						assert.NotContains(t, ev.Data, "payload", "content rides only at redacted or above")
					}
				}
				if deltas {
					assert.Equal(t, 2, deltaCount)
				} else {
					assert.Zero(t, deltaCount)
				}
				h.validate()
			})
		}
	})
}

func TestReconnectMidRunWithOverlap(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv, h := watchRunning(t, stub, socket)
		act := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{}))
		h.waitTypes(conv.ID(), "tool.requested")

		conv.DropSockets()
		// While the receiver is away the run goes on.
		mustAppend(t, conv, oh.ObservationEvent(act, "ok", false))
		act2 := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{}))
		h.waitLive(conv, 2)
		mustAppend(t, conv, oh.ObservationEvent(act2, "ok", false))
		mustStatus(t, conv, oh.StatusFinished)

		got := h.waitTypes(conv.ID(), "state.delta", "run.finished")
		assert.Equal(t, 1, count(got, "run.started"), "one run across the reconnect")
		assert.Positive(t, h.metric("otelcol_openhands_reconnects", "", ""))
		if socket == socketEvents {
			assert.Positive(t, h.metric("otelcol_openhands_duplicates_dropped", "", ""), "the resume margin overlaps")
		} else {
			assert.Zero(t, h.metric("otelcol_openhands_duplicates_dropped", "", ""), "after_seq resumes exactly")
		}
		assert.Equal(t, int64(len(h.events())), h.metric("otelcol_openhands_aep_events", "", ""))
		assert.Equal(t, 2, count(got, "tool.completed"))
		assert.Equal(t, 2, count(got, "state.snapshot"), "one connect snapshot per connection")
		h.validate()
		h.assertEveryVendorEventOnce(conv)
	})
}

// TestReconnectAfterLongHistory: a reconnect after thousands of events,
// stamped 100 ms apart, overlaps only the resume margin (legacy) or nothing
// (session), and the bounded overlap window still drops every repeat.
func TestReconnectAfterLongHistory(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{testKey}, Clock: steppingClock(historyStart, 100*time.Millisecond)})
		conv := createConversation(t, stub)
		mustStatus(t, conv, oh.StatusRunning)
		for range 500 {
			act := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{}))
			mustAppend(t, conv, oh.ObservationEvent(act, "ok", false))
		}
		h := startHarness(t, fastConfig(socket, stub))
		h.waitLive(conv, 1)

		conv.DropSockets()
		act := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{}))
		h.waitLive(conv, 2)
		mustAppend(t, conv, oh.ObservationEvent(act, "ok", false))
		mustStatus(t, conv, oh.StatusFinished)
		got := h.waitTypes(conv.ID(), "tool.completed", "state.delta", "run.finished")
		assert.Equal(t, 501, count(got, "tool.completed"))
		if socket == socketEvents {
			assert.Positive(t, h.metric("otelcol_openhands_duplicates_dropped", "", ""), "the resume margin overlaps")
		}
		h.validate()
		h.assertEveryVendorEventOnce(conv)
	})
}

// last returns the last event of type typ.
func last(evs []*aep.Event, typ string) *aep.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	return nil
}

func count(evs []*aep.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestAdversarialInterleaving appends events while the receiver pages the
// history, on every page, so live frames overlap the history in both
// directions; each vendor event must still come out once, in log order.
func TestAdversarialInterleaving(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv := createConversation(t, stub)
		mustStatus(t, conv, oh.StatusRunning)
		for range 150 { // more than one page of history
			mustAppend(t, conv, oh.MessageEvent("agent", "thinking"))
		}
		var appended sync.WaitGroup
		stub.OnEventSearch(func(string) {
			appended.Go(func() {
				for range 5 {
					_, _ = conv.Append(oh.MessageEvent("agent", "live"))
				}
			})
			appended.Wait()
		})
		h := startHarness(t, fastConfig(socket, stub))
		h.waitLive(conv, 1)
		stub.OnEventSearch(nil)
		mustStatus(t, conv, oh.StatusFinished)
		h.waitTypes(conv.ID(), "state.delta", "run.finished")

		// Log order: the vendor events' AEP outputs follow the server's log.
		var emitted []string
		for _, ev := range h.session(conv.ID()) {
			if id, _ := ev.Data["vendor_event_id"].(string); id != "" && ev.Type != "run.started" && ev.Type != "run.finished" {
				emitted = append(emitted, id)
			}
		}
		var logOrder []string
		for _, ve := range conv.Events() {
			logOrder = append(logOrder, ve.ID())
		}
		// The connect snapshot is transient (not in the log); drop it.
		emitted = slices.DeleteFunc(emitted, func(id string) bool { return !slices.Contains(logOrder, id) })
		assert.Equal(t, logOrder, emitted)
		h.validate()
		h.assertEveryVendorEventOnce(conv)
	})
}

func TestTwoServers(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		a, b := startStub(t), startStub(t)
		ca, cb := createConversation(t, a), createConversation(t, b)
		h := startHarness(t, fastConfig(socket, a, b))
		h.waitLive(ca, 1)
		h.waitLive(cb, 1)
		mustStatus(t, ca, oh.StatusRunning)
		mustStatus(t, cb, oh.StatusRunning)
		mustStatus(t, ca, oh.StatusFinished)
		mustStatus(t, cb, oh.StatusStuck)
		h.waitTypes(ca.ID(), "state.delta", "run.finished")
		h.waitTypes(cb.ID(), "state.delta", "run.failed")
		assert.NotEqual(t, h.session(ca.ID())[0].Source, h.session(cb.ID())[0].Source)
		h.validate()
		assertReadOnly(t, a)
		assertReadOnly(t, b)
	})
}

func TestSessionEndsWhenConversationDisappears(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv, h := watchNew(t, stub, socket)
		require.NoError(t, conv.Delete())
		got := h.waitTypes(conv.ID(), "session.ended")
		assert.Equal(t, "killed", last(got, "session.ended").Data["reason"])
		// Later polls must not bring it back.
		waitRoundsEnded(t, stub, 5)
		assert.Equal(t, 1, count(h.session(conv.ID()), "session.started"))
		h.validate()
	})
}

func TestIdleDetachAndReattach(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv := createConversation(t, stub)
		cfg := fastConfig(socket, stub)
		cfg.IdleDetach = 200 * time.Millisecond
		h := startHarness(t, cfg)
		h.waitLive(conv, 1)
		mustStatus(t, conv, oh.StatusRunning)
		mustStatus(t, conv, oh.StatusFinished)
		h.waitTypes(conv.ID(), "state.delta", "run.finished")
		assert.Eventually(t, func() bool { return conv.Sockets() == 0 }, waitFor, tick, "an idle conversation is detached")

		mustStatus(t, conv, oh.StatusRunning) // search shows it move
		waitSockets(t, conv, 1)
		got := h.waitTypes(conv.ID(), "run.started", "state.delta")
		assert.Equal(t, "run:"+conv.ID()+":2", last(got, "state.delta").Run)
		h.validate()
		h.assertEveryVendorEventOnce(conv)
	})
}

func TestBadInputKeepsOtherConversationsFlowing(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		bad, good := createConversation(t, stub), createConversation(t, stub)
		h := startHarness(t, fastConfig(socket, stub))
		h.waitLive(bad, 1)
		h.waitLive(good, 1)

		for _, f := range badFrames(socket) {
			require.Equal(t, 1, bad.InjectFrame(endpointOf(socket), f))
		}
		mustStatus(t, good, oh.StatusRunning)
		mustStatus(t, bad, oh.StatusRunning)
		h.waitTypes(good.ID(), "run.started", "state.delta")
		got := h.waitTypes(bad.ID(), "x.openhands.future.telepathy", "run.started", "state.delta")
		assert.Equal(t, aep.SeverityDebug, last(got, "x.openhands.future.telepathy").Severity,
			"the unknown kind degrades to x.openhands.* visibility")

		decodeErrors := h.metric("otelcol_openhands_decode_errors", "cause", "event") + h.metric("otelcol_openhands_decode_errors", "cause", "frame")
		assert.Equal(t, int64(2), decodeErrors, "bad JSON and missing fields")
		assert.Equal(t, int64(1), h.metric("otelcol_openhands_vendor_events", "kind", "other"))
		assert.Equal(t, int64(2), h.metric("otelcol_openhands_conversations_attached", "", ""))

		// An oversize frame drops the socket; the receiver comes back.
		bad.InjectFrame(endpointOf(socket), oh.OversizeFrame(int(h.rcv.cfg.MaxFrameBytes)+1))
		h.waitLive(bad, 2)
		mustStatus(t, bad, oh.StatusFinished)
		h.waitTypes(bad.ID(), "state.delta", "run.finished")

		// Garbage and looping search pages: logged, existing sessions unharmed.
		stub.SetConversationSearchFault(oh.SearchLoop)
		waitRoundsEnded(t, stub, 3)
		stub.SetConversationSearchFault(oh.SearchGarbage)
		waitRoundsEnded(t, stub, 3)
		assert.Equal(t, componentstatus.StatusRecoverableError, h.host.last())
		stub.SetConversationSearchFault(oh.SearchOK)
		assert.Eventually(t, func() bool { return h.host.last() == componentstatus.StatusOK }, waitFor, tick)
		mustStatus(t, good, oh.StatusFinished)
		h.waitTypes(good.ID(), "state.delta", "run.finished")
		assert.Zero(t, count(h.session(good.ID()), "session.ended"), "a broken search ends nothing")
		h.validate()
	})
}

// badFrames are a malformed frame, an event missing its id and an event of
// an unknown kind, as each socket carries them.
func badFrames(socket string) [][]byte {
	if socket == socketEvents {
		return [][]byte{oh.BadJSONFrame(), oh.MissingFieldsFrame(), oh.UnknownKindFrame()}
	}
	wrap := func(typ string, ev []byte) []byte {
		return []byte(`{"type":"` + typ + `","seq":100000,"event":` + string(ev) + `}`)
	}
	return [][]byte{
		oh.BadJSONFrame(),
		[]byte(`{"type":"durable"}`), // no seq, no event
		wrap("transient", oh.UnknownKindFrame()),
		[]byte(`{"type":"frame_from_the_future","anything":1}`), // ignored, as the protocol asks
	}
}

func TestWrongKeyIsPermanent(t *testing.T) {
	stub := startStub(t)
	createConversation(t, stub)
	cfg := fastConfig(socketEvents, stub)
	cfg.Servers[0].SessionAPIKey = configopaque.String("wrong")
	h := startHarness(t, cfg)
	assert.Eventually(t, func() bool { return h.host.last() == componentstatus.StatusPermanentError }, waitFor, tick)
	assert.Empty(t, h.events())
}

func TestAgentServerRestartMidRun(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv, h := watchRunning(t, stub, socket)
		mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{}))
		h.waitTypes(conv.ID(), "tool.requested")

		require.NoError(t, stub.Restart()) // a running conversation comes back as error
		waitSockets(t, conv, 1)
		got := h.waitTypes(conv.ID(), "state.delta", "run.failed", "tool.failed")
		assert.Equal(t, "error", last(got, "run.failed").Data["reason"])
		assert.Equal(t, 1, count(got, "run.started"))
		h.validate()
		h.assertEveryVendorEventOnce(conv)
	})
}

func TestUnknownConversationCloseRetriesAtDiscovery(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv, h := watchNew(t, stub, socket)
		conv.CloseSockets(4004, "Conversation not found")
		// 4004 stops the socket's own retries; discovery still lists the
		// conversation, so its next round attaches again.
		h.waitLive(conv, 2)
		mustStatus(t, conv, oh.StatusRunning)
		h.waitTypes(conv.ID(), "run.started", "state.delta")
		assert.Zero(t, h.metric("otelcol_openhands_reconnects", "", ""), "a 4004 is not retried by the socket loop")
		h.validate()
	})
}

// TestTransportShapesAndTimestampForms runs a reconnect against a server
// of the v1.31–v1.36 transport shape (no parent_id) whose clock yields
// whole seconds, so vendor timestamps carry no fraction.
func TestTransportShapesAndTimestampForms(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := oh.Start(t, oh.Config{
			SessionAPIKeys:      []string{testKey},
			LegacyTransportDump: true,
			Clock:               steppingClock(time.Date(2026, 8, 22, 14, 3, 11, 0, time.UTC), time.Second),
		})
		conv, h := watchRunning(t, stub, socket)
		act := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{}))
		h.waitTypes(conv.ID(), "tool.requested")
		conv.DropSockets()
		mustAppend(t, conv, oh.ObservationEvent(act, "done", false))
		h.waitLive(conv, 2)
		mustStatus(t, conv, oh.StatusFinished)
		got := h.waitTypes(conv.ID(), "state.delta", "run.finished")

		completed := last(got, "tool.completed")
		require.NotNil(t, completed)
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$`, completed.Data["vendor_ts"], "the naive timestamp rides verbatim")
		h.validate()
		h.assertEveryVendorEventOnce(conv)
	})
}

// TestSecretSplitAcrossDeltasNeverLeavesWhole drives the real redaction
// pipeline: an operator-named secret (secret_env) streamed one character
// per delta must not appear whole in any emitted record.
func TestSecretSplitAcrossDeltasNeverLeavesWhole(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		const secret = "hunter2-correct-horse"
		t.Setenv("OPENHANDS_TEST_SECRET", secret)
		// Streamed text rides the legacy socket only on servers before the
		// session socket; 1.58.2 blanks it there.
		stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{testKey}, WithoutSessionSocket: socket == socketEvents})
		conv := createConversation(t, stub)
		cfg := fastConfig(socket, stub)
		cfg.Deltas = true
		cfg.Capture = CaptureConfig{Level: aep.CaptureRedacted}
		cfg.SecretEnv = []string{"OPENHANDS_TEST_SECRET"}
		h := startHarness(t, cfg)
		h.waitLive(conv, 1)
		mustStatus(t, conv, oh.StatusRunning)

		chunks := []string{"the key is "}
		for _, r := range secret {
			chunks = append(chunks, string(r))
		}
		chunks = append(chunks, " ok")
		_, err := conv.StreamAgentMessage(chunks...)
		require.NoError(t, err)
		mustStatus(t, conv, oh.StatusFinished)
		got := h.waitTypes(conv.ID(), "state.delta", "run.finished")

		var streamed strings.Builder
		for _, ev := range got {
			raw, err := ev.MarshalJSON()
			require.NoError(t, err)
			assert.NotContains(t, string(raw), secret)
			if ev.Type == "x.openhands.streaming.delta" {
				payload, _ := ev.Data["payload"].(map[string]any)
				content, _ := payload["content"].(string)
				streamed.WriteString(content)
			}
		}
		assert.Contains(t, streamed.String(), "[REDACTED:secret]", "the delta stream carried the redacted text")
		assert.Equal(t, aep.CaptureRedacted, last(got, "x.openhands.message.event").Capture)
		h.validate()
	})
}

// TestAutoSocketFallsBackOnOlderServers: `socket: auto` attaches to
// /sockets/session where the server has it and to /sockets/events on a
// server that predates it.
func TestAutoSocketFallsBackOnOlderServers(t *testing.T) {
	current := startStub(t)
	older := oh.Start(t, oh.Config{SessionAPIKeys: []string{testKey}, WithoutSessionSocket: true})
	cNew, cOld := createConversation(t, current), createConversation(t, older)
	h := startHarness(t, fastConfig(socketAuto, current, older))
	h.waitLive(cNew, 1)
	h.waitLive(cOld, 1)
	mustStatus(t, cNew, oh.StatusRunning)
	mustStatus(t, cOld, oh.StatusRunning)
	h.waitTypes(cNew.ID(), "run.started", "state.delta")
	h.waitTypes(cOld.ID(), "run.started", "state.delta")

	endpoints := map[string]oh.Endpoint{}
	for _, s := range []*oh.Server{current, older} {
		for _, f := range s.InboundFrames() {
			endpoints[f.ConversationID] = f.Endpoint
		}
	}
	assert.Equal(t, oh.EndpointSession, endpoints[cNew.ID()])
	assert.Equal(t, oh.EndpointEvents, endpoints[cOld.ID()])
	h.validate()
	assertReadOnly(t, current)
	assertReadOnly(t, older)
}

// TestRefusedSocketsBackOff: a server that accepts and at once closes
// (1013, too many subscribers) must see exponentially spaced retries, not
// one every initial_interval, and the conversation attaches once it lets up.
func TestRefusedSocketsBackOff(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv := createConversation(t, stub)
		conv.RefuseSockets(5, "Too many connections for this conversation")
		h := startHarness(t, fastConfig(socket, stub))
		h.waitLive(conv, 1)
		assert.Equal(t, int64(5), h.metric("otelcol_openhands_reconnects", "", ""))
		// Backoff of 10, 20, 40, 80 ms (±20 %) between the six attempts: at
		// least 120 ms from first to last, where a reset to the initial
		// interval would take about 50. (A lower bound: load only adds.)
		var auths []time.Time
		for _, f := range stub.InboundFrames() {
			auths = append(auths, f.At)
		}
		require.Len(t, auths, 6, "one auth frame per attempt")
		assert.GreaterOrEqual(t, auths[5].Sub(auths[0]), 120*time.Millisecond)
		mustStatus(t, conv, oh.StatusRunning)
		h.waitTypes(conv.ID(), "run.started", "state.delta")
		h.validate()
	})
}

// TestSnapshotBufferedDuringHistoryIsStale: on the legacy socket a run ends
// and the next one starts while the receiver pages the history, so the
// run's end-of-run full_state waits in the socket buffer behind history
// that already started the next run. Drained afterwards it must not move
// the status back: no premature terminal, no extra run.
func TestSnapshotBufferedDuringHistoryIsStale(t *testing.T) {
	stub := startStub(t)
	conv, h := watchRunning(t, stub, socketEvents)
	h.waitTypes(conv.ID(), "run.started", "state.delta")

	var once sync.Once
	stub.OnEventSearch(func(string) {
		once.Do(func() {
			require.NoError(t, conv.FinishRun(oh.StatusFinished)) // persisted status, then a live full_state
			mustStatus(t, conv, oh.StatusRunning)
		})
	})
	conv.DropSockets()
	h.waitLive(conv, 2)
	stub.OnEventSearch(nil)
	mustStatus(t, conv, oh.StatusWaitingForConfirmation)
	mustStatus(t, conv, oh.StatusRunning)
	require.NoError(t, conv.FinishRun(oh.StatusFinished))

	got := h.waitTypes(conv.ID(), "state.delta", "run.finished", "state.snapshot")
	assert.Equal(t, 2, count(got, "run.started"), "%v", types(got))
	assert.Equal(t, 2, count(got, "run.finished"))
	assert.Equal(t, "run:"+conv.ID()+":2", last(got, "run.finished").Run)
	h.validate()
}
