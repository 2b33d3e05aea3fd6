package openhandscontrol

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
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
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"
)

const waitFor = 10 * time.Second

// The gate is what the aeprelay exporter's control key expects.
var _ aeprelayexporter.ControlHandler = (*gate)(nil)

// fakeSession is an observed conversation: its lock, notes and the events
// the gate emitted through it, in order.
type fakeSession struct {
	server Server
	view   *fakeView

	mu      sync.Mutex
	notes   *Notes
	emitted []*aep.Event
	resent  []*aep.Event
	saved   []State
	saveErr error         // what Save fails with
	hold    chan struct{} // when set, Control waits for it to close
}

func (s *fakeSession) Server() Server { return s.server }

func (s *fakeSession) Control(_ context.Context, fn func(n *Notes) []*aep.Event) {
	if s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitted = append(s.emitted, fn(s.notes)...)
}

// Save records the control state as a receiver with storage would store
// it.
func (s *fakeSession) Save(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saveErr != nil {
		return s.saveErr
	}
	s.saved = append(s.saved, s.notes.State())
	return nil
}

func (s *fakeSession) Resend(_ context.Context, ev *aep.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resent = append(s.resent, ev)
}

// awaitResent waits until n recorded acks were re-sent, and returns them.
func (s *fakeSession) awaitResent(t *testing.T, n int) []*aep.Event {
	t.Helper()
	var resent []*aep.Event
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		resent = slices.Clone(s.resent)
		return len(resent) == n
	}, waitFor, 5*time.Millisecond, "re-sent acks")
	return resent
}

// observe is the receiver mapping a status flip of the conversation:
// the view moves and the notes see the flip.
func (s *fakeSession) observe(status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.view.status
	s.view.status = status
	s.emitted = append(s.emitted, s.notes.Decorate(prev, nil, time.Now())...)
}

func (s *fakeSession) events() []*aep.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.emitted)
}

type observer map[string]*fakeSession

func (o observer) Sessions(id string) []Session {
	if s, ok := o[id]; ok {
		return []Session{s}
	}
	return nil
}

func (o observer) Servers() []Server {
	var out []Server
	for _, s := range o {
		out = append(out, s.server)
	}
	return out
}

// statusHost records the component status the gate reports.
type statusHost struct {
	component.Host
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *statusHost) statuses() []componentstatus.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []componentstatus.Status
	for _, ev := range h.events {
		out = append(out, ev.Status())
	}
	return out
}

type gateHarness struct {
	gate *gate
	tel  *componenttest.Telemetry
	host *statusHost
	stub *oh.Server
	conv *oh.Conversation
	sess *fakeSession
}

// startGate runs a gate over one conversation of a stub agent server.
func startGate(t *testing.T, cfg *Config, status string) *gateHarness {
	t.Helper()
	stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{"k"}})
	conv, err := stub.CreateConversation(oh.ConversationOptions{Status: status})
	require.NoError(t, err)
	return newGateHarness(t, cfg, stub, conv)
}

// newGateHarness runs a new gate over conv, whose conversation is
// observed with fresh notes in its last status.
func newGateHarness(t *testing.T, cfg *Config, stub *oh.Server, conv *oh.Conversation) *gateHarness {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := extensiontest.NewNopSettings(componentType)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	ext, err := NewFactory().Create(context.Background(), set, cfg)
	require.NoError(t, err)
	g := ext.(*gate)
	host := &statusHost{Host: componenttest.NewNopHost()}
	require.NoError(t, g.Start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, g.Shutdown(context.Background())) })
	base, err := url.Parse(stub.URL())
	require.NoError(t, err)
	view := &fakeView{status: conv.Status(), capture: aep.CaptureRedacted}
	sess := &fakeSession{
		server: Server{Name: "stub", Base: base, Key: "k", Client: &http.Client{Timeout: 5 * time.Second}},
		view:   view, notes: newNotes(view, cfg.Enabled),
	}
	return &gateHarness{gate: g, tel: tel, host: host, stub: stub, conv: conv, sess: sess}
}

func gateConfig(enabled bool) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Enabled = enabled
	cfg.ReplyGuard = 300 * time.Millisecond
	return cfg
}

func (h *gateHarness) register() func() {
	_, unregister := h.gate.Register(observer{h.conv.ID(): h.sess})
	return unregister
}

func (h *gateHarness) command(id, typ string) *aep.Event {
	return &aep.Event{AEP: aep.Version, ID: id, Type: typ, Source: "aep://ops", Agent: "ops", Session: h.conv.ID()}
}

// await waits until the session emitted an event of typ caused by cause.
func (h *gateHarness) await(t *testing.T, typ, cause string) *aep.Event {
	t.Helper()
	var found *aep.Event
	require.Eventually(t, func() bool {
		for _, ev := range h.sess.events() {
			if ev.Type == typ && ev.Cause == cause {
				found = ev
				return true
			}
		}
		return false
	}, waitFor, 5*time.Millisecond, "no %s caused by %s; emitted %v", typ, cause, types(h.sess.events()))
	return found
}

func (h *gateHarness) counter(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	return telemetrytest.Counter(t, h.tel, name, attrs...)
}

// writesAnswered counts the REST writes whose answer (or failure) the gate
// has taken in.
func (h *gateHarness) writesAnswered(t *testing.T) uint64 {
	t.Helper()
	m, err := h.tel.GetMetric("otelcol_openhandscontrol_write_latency")
	if err != nil {
		return 0
	}
	var n uint64
	for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		n += dp.Count
	}
	return n
}

func TestAcceptsFollowsTheGate(t *testing.T) {
	off := startGate(t, gateConfig(false), "idle").gate
	assert.Equal(t, []string{}, off.Accepts())
	newNotes, unregister := off.Register(observer{})
	unregister()
	assert.False(t, newNotes(&fakeView{}, State{}).answerable, "a closed gate's notes offer no respond path")
	on := startGate(t, gateConfig(true), "idle").gate
	assert.Equal(t, accepted, on.Accepts())
	assert.Equal(t, 10*time.Second, on.AckWindow())
	newNotes, unregister = on.Register(observer{})
	unregister()
	assert.True(t, newNotes(&fakeView{}, State{}).answerable)
}

// TestOpenGateWarnsOfPlaintextServers: an open gate warns once per
// server of a registering receiver that its writes reach over plaintext
// http on a host that is not loopback; a closed gate writes nothing.
func TestOpenGateWarnsOfPlaintextServers(t *testing.T) {
	servers := observer{}
	for name, e := range map[string]string{
		"remote": "http://agents.example:8000", "lan": "http://10.0.0.7:8000",
		"loopback": "http://127.0.0.1:8000", "tls": "https://agents.example",
	} {
		base, err := url.Parse(e)
		require.NoError(t, err)
		servers[name] = &fakeSession{server: Server{Name: name, Base: base}}
	}
	for _, tc := range []struct {
		enabled bool
		want    []string
	}{
		{false, nil},
		{true, []string{"server lan", "server remote"}},
	} {
		t.Run(fmt.Sprint("enabled=", tc.enabled), func(t *testing.T) {
			core, logs := zapobserver.New(zap.WarnLevel)
			set := extensiontest.NewNopSettings(componentType)
			set.Logger = zap.New(core)
			ext, err := NewFactory().Create(context.Background(), set, gateConfig(tc.enabled))
			require.NoError(t, err)
			_, unregister := ext.(*gate).Register(servers)
			unregister()
			var got []string
			for _, e := range logs.FilterMessageSnippet("plaintext").All() {
				assert.Equal(t, []any{"control writes"}, e.ContextMap()["carries"])
				got = append(got, e.ContextMap()["key"].(string))
			}
			slices.Sort(got)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestHandleCommandNeverBlocksTheReadLoop(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	h.sess.hold = make(chan struct{}) // a pipeline that does not take events
	returned := make(chan struct{})
	go func() {
		h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(waitFor):
		t.Fatal("HandleCommand waited for the session")
	}
	close(h.sess.hold)
	h.await(t, "control.accepted", "c1")
}

func TestAPauseEndToEndWithMetrics(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	h.await(t, "control.accepted", "c1")
	require.Eventually(t, func() bool { return h.conv.Status() == oh.StatusPaused }, waitFor, 5*time.Millisecond)
	writes := h.stub.Writes()
	require.Len(t, writes, 1)
	assert.Equal(t, "k", writes[0].Header.Get("X-Session-API-Key"))

	assert.Equal(t, int64(1), h.counter(t, "otelcol_openhandscontrol_commands",
		attribute.String("type", typePause), attribute.String("outcome", "accepted")))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_openhandscontrol_acks",
		attribute.String("decision", "accepted"), attribute.Bool("redelivery", false)))
	m, err := h.tel.GetMetric("otelcol_openhandscontrol_write_latency")
	require.NoError(t, err)
	hist := m.Data.(metricdata.Histogram[float64])
	require.Len(t, hist.DataPoints, 1)
	class, _ := hist.DataPoints[0].Attributes.Value("status_class")
	assert.Equal(t, "2xx", class.AsString())
}

func TestRedeliveries(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusIdle)
	h.register()
	h.stub.SetWriteFault(oh.WriteFault{Delay: 200 * time.Millisecond})
	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true) // refused: idle
	ack := h.await(t, "control.rejected", "c1")

	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	assert.Same(t, ack, h.sess.awaitResent(t, 1)[0], "the recorded ack, not a new decision")

	input := h.command("c2", typeSendInput)
	input.Data = map[string]any{"text": "hi"}
	for range 3 {
		h.gate.HandleCommand(context.Background(), nil, input, true)
	}
	h.await(t, "x.openhands.input.sent", "c2")
	assert.Len(t, h.stub.Writes(), 1, "executed once")
	acks := 0
	for _, ev := range h.sess.events() {
		if ev.Cause == "c2" && ev.Type == "control.accepted" {
			acks++
		}
	}
	assert.Equal(t, 1, acks)
	assert.Equal(t, int64(2), h.counter(t, "otelcol_openhandscontrol_commands", attribute.String("outcome", outcomeDuplicate)))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_openhandscontrol_commands", attribute.String("outcome", outcomeReacked)))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_openhandscontrol_acks", attribute.Bool("redelivery", true)))
}

func TestAnUnobservedSessionIsTriedAfreshLater(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	require.Eventually(t, func() bool {
		return h.counter(t, "otelcol_openhandscontrol_commands", attribute.String("outcome", outcomeUnroutable)) == 1
	}, waitFor, 5*time.Millisecond)
	assert.Empty(t, h.stub.Writes())

	unregister := h.register()
	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	h.await(t, "control.accepted", "c1")
	unregister()
	h.gate.HandleCommand(context.Background(), nil, h.command("c2", typeResume), true)
	require.Eventually(t, func() bool {
		return h.counter(t, "otelcol_openhandscontrol_commands", attribute.String("outcome", outcomeUnroutable)) == 2
	}, waitFor, 5*time.Millisecond)
}

func TestAClosedGateAnswersUnsupported(t *testing.T) {
	h := startGate(t, gateConfig(false), oh.StatusRunning)
	h.register()
	for _, typ := range append(slices.Clone(accepted), "control.cancel") {
		h.gate.HandleCommand(context.Background(), nil, h.command("c-"+typ, typ), true)
		ack := h.await(t, "control.rejected", "c-"+typ)
		assert.Equal(t, "unsupported", ack.Data["reason"])
	}
	assert.Empty(t, h.stub.Writes())
}

func TestReplyGuardAndUnreachableServers(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	h.stub.SetWriteFault(oh.WriteFault{Delay: 2 * time.Second})
	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typeInterrupt), true)
	h.await(t, "control.accepted", "c1")
	assert.Equal(t, oh.StatusRunning, h.conv.Status(), "acked will-try before the write landed")
	require.Eventually(t, func() bool { return h.conv.Status() == oh.StatusPaused }, waitFor, 5*time.Millisecond)
	require.Eventually(t, func() bool { return h.writesAnswered(t) == 1 }, waitFor, 5*time.Millisecond)
	h.sess.observe(oh.StatusPaused)
	h.sess.observe(oh.StatusRunning) // resumed elsewhere

	h.stub.Close()
	h.gate.HandleCommand(context.Background(), nil, h.command("c2", typePause), true)
	ack := h.await(t, "control.rejected", "c2")
	assert.Equal(t, "busy", ack.Data["reason"])
	assert.Contains(t, ack.Data["detail"], "POST /api/conversations/"+h.conv.ID()+"/pause: ", "no answer: refused or cut off")
	assert.Contains(t, ack.Data["detail"], "agent server unreachable: ")
	assert.NotContains(t, ack.Data["detail"], h.sess.server.Base.Host, "the server's address stays in the local log")
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, h.host.statuses())
}

func TestDedupeIsBounded(t *testing.T) {
	d := newDedupe(2)
	for _, id := range []string{"a", "b", "c"} {
		k := commandKey{"s", id}
		_, fresh := d.admit(k)
		require.True(t, fresh)
		assert.True(t, d.record(k, decision{ack: &aep.Event{ID: "ack-" + id}}, nil))
		assert.False(t, d.record(k, decision{ack: &aep.Event{ID: "other"}}, nil), "one decision per command")
	}
	_, fresh := d.admit(commandKey{"s", "a"})
	assert.True(t, fresh, "the oldest decision is forgotten past the bound")
	e, fresh := d.admit(commandKey{"s", "c"})
	assert.False(t, fresh)
	assert.Equal(t, "ack-c", e.decision.ack.ID)
	assert.Len(t, d.entries, 3, "two decided, one in flight")
}

// claimants is an observer whose sessions more than one server claims.
type claimants map[string][]*fakeSession

func (o claimants) Sessions(id string) []Session {
	var out []Session
	for _, s := range o[id] {
		out = append(out, s)
	}
	return out
}

func (o claimants) Servers() []Server { return nil }

func TestASessionTwoServersClaimIsNeverRoutedToAGuess(t *testing.T) {
	prod := startGate(t, gateConfig(true), oh.StatusRunning)
	g := prod.gate
	// dev lists the same conversation id, with its own key.
	dev := startGate(t, gateConfig(true), oh.StatusRunning)
	_, err := dev.stub.CreateConversation(oh.ConversationOptions{ID: prod.conv.ID(), Status: oh.StatusRunning})
	require.NoError(t, err)
	dev.sess.server.Name = "dev"
	_, unregisterProd := g.Register(observer{prod.conv.ID(): prod.sess})
	defer unregisterProd()
	_, unregisterDev := g.Register(observer{prod.conv.ID(): dev.sess})

	for _, typ := range []string{typePause, typeSendInput} {
		cmd := prod.command("c-"+typ, typ)
		cmd.Data = map[string]any{"text": "hi"}
		g.HandleCommand(context.Background(), nil, cmd, true)
		ack := prod.await(t, "control.rejected", cmd.ID)
		assert.Equal(t, reasonRefused, ack.Data["reason"])
		assert.Contains(t, ack.Data["detail"], "claimed by 2 observed conversations")
	}
	assert.Empty(t, prod.stub.Writes())
	assert.Empty(t, dev.stub.Writes(), "never written with the other server's key")
	assert.Empty(t, dev.sess.events(), "one nack, in the first claim's stream")
	assert.Equal(t, int64(2), prod.counter(t, "otelcol_openhandscontrol_session_conflicts"))
	assert.Equal(t, int64(1), prod.counter(t, "otelcol_openhandscontrol_commands",
		attribute.String("type", typePause), attribute.String("outcome", reasonRefused)))

	// dev forgets the id: prod's conversation is the one claimant again.
	unregisterDev()
	g.HandleCommand(context.Background(), nil, prod.command("c2", typePause), true)
	prod.await(t, "control.accepted", "c2")
	require.Len(t, prod.stub.Writes(), 1)
	assert.Empty(t, dev.stub.Writes())
}

// TestClaimsFollowRegistrationOrder: the first claim, whose stream
// carries a conflict's nack, is the first registered receiver's, whatever
// order the gate's map of observers iterates in.
func TestClaimsFollowRegistrationOrder(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(componentType), gateConfig(false))
	require.NoError(t, err)
	g := ext.(*gate)
	var want []string
	for i := range 20 {
		name := fmt.Sprint("server-", i)
		want = append(want, name)
		_, unregister := g.Register(observer{"s1": &fakeSession{server: Server{Name: name}}})
		t.Cleanup(unregister)
	}
	var got []string
	for _, s := range g.claims("s1") {
		got = append(got, s.Server().Name)
	}
	assert.Equal(t, want, got)
}

func TestOneReceiverWithTwoClaimsRefusesToo(t *testing.T) {
	prod := startGate(t, gateConfig(true), oh.StatusRunning)
	dev := startGate(t, gateConfig(true), oh.StatusRunning)
	_, unregister := prod.gate.Register(claimants{prod.conv.ID(): {prod.sess, dev.sess}})
	defer unregister()
	prod.gate.HandleCommand(context.Background(), nil, prod.command("c1", typeInterrupt), true)
	ack := prod.await(t, "control.rejected", "c1")
	assert.Equal(t, reasonRefused, ack.Data["reason"])
	assert.Empty(t, prod.stub.Writes())
	assert.Empty(t, dev.stub.Writes())
}

func TestACommandOverALinkWithoutCredentialsIsUnsupported(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusWaitingForConfirmation)
	h.register()
	h.sess.view.attention = "req-1"
	for _, typ := range accepted {
		cmd := h.command("c-"+typ, typ)
		cmd.Subject = "req-1"
		cmd.Data = map[string]any{"text": "hi", "answer": map[string]any{"option": "approve"}}
		h.gate.HandleCommand(context.Background(), nil, cmd, false)
		ack := h.await(t, "control.rejected", cmd.ID)
		assert.Equal(t, reasonUnsupported, ack.Data["reason"])
		assert.Contains(t, ack.Data["detail"], "relay link sends no credentials")
	}
	assert.Empty(t, h.stub.Writes(), "an unauthenticated link executes nothing")
}

// decidedCommands counts the commands of typ the gate has accounted for.
func (h *gateHarness) decidedCommands(t *testing.T, typ string) int64 {
	var n int64
	for _, outcome := range []string{"accepted", reasonBusy, reasonRefused, reasonInvalid, reasonUnsupported, outcomeOverloaded, outcomeUnroutable} {
		n += h.counter(t, "otelcol_openhandscontrol_commands", attribute.String("type", typ), attribute.String("outcome", outcome))
	}
	return n
}

func TestAFloodOfPausesMakesOneWrite(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	h.stub.SetWriteFault(oh.WriteFault{Delay: 50 * time.Millisecond})
	const n = 10_000
	for i := range n {
		h.gate.HandleCommand(context.Background(), nil, h.command(fmt.Sprintf("c%d", i), typePause), true)
	}
	require.Eventually(t, func() bool { return h.decidedCommands(t, typePause) == n }, 4*waitFor, 10*time.Millisecond)
	// The status the pause flips is not observed yet (the view still says
	// running): every later pause waits on the first write.
	assert.Equal(t, 1, len(h.stub.Writes()), "POSTs")
	assert.Equal(t, int64(1), h.counter(t, "otelcol_openhandscontrol_commands",
		attribute.String("type", typePause), attribute.String("outcome", "accepted")))
	assert.Positive(t, h.counter(t, "otelcol_openhandscontrol_commands",
		attribute.String("type", typePause), attribute.String("outcome", reasonBusy)))
}

func TestOneWriteInFlightPerConversation(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	h.stub.SetWriteFault(oh.WriteFault{Delay: 3 * time.Second})
	first := h.command("c1", typeSendInput)
	first.Data = map[string]any{"text": "one"}
	h.gate.HandleCommand(context.Background(), nil, first, true)
	h.await(t, "control.accepted", "c1") // the reply guard expired: will try

	for _, typ := range []string{typeSendInput, typeInterrupt} {
		cmd := h.command("c-"+typ, typ)
		cmd.Data = map[string]any{"text": "two"}
		h.gate.HandleCommand(context.Background(), nil, cmd, true)
		ack := h.await(t, "control.rejected", cmd.ID)
		assert.Equal(t, reasonBusy, ack.Data["reason"])
		assert.Contains(t, ack.Data["detail"], "the write of x.openhands.control.send_input (command c1) to this conversation has not answered within reply_guard")
	}
	h.await(t, "x.openhands.input.sent", "c1")
	h.stub.SetWriteFault(oh.WriteFault{})
	h.gate.HandleCommand(context.Background(), nil, h.command("c3", typeInterrupt), true)
	h.await(t, "control.accepted", "c3")
	assert.Len(t, h.stub.Writes(), 2)
}

func TestACommandWaitsForTheWriteInFlight(t *testing.T) {
	cfg := gateConfig(true)
	cfg.ReplyGuard = 8 * time.Second
	h := startGate(t, cfg, oh.StatusRunning)
	h.register()
	const delay = time.Second
	h.stub.SetWriteFault(oh.WriteFault{Delay: delay})
	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	require.Eventually(t, func() bool { return len(h.stub.Writes()) == 1 }, waitFor, 5*time.Millisecond)
	input := h.command("c2", typeSendInput)
	input.Data = map[string]any{"text": "hi"}
	h.gate.HandleCommand(context.Background(), nil, input, true)
	h.await(t, "x.openhands.input.sent", "c2")
	h.await(t, "control.accepted", "c1")
	writes := h.stub.Writes()
	require.Len(t, writes, 2)
	assert.GreaterOrEqual(t, writes[1].At.Sub(writes[0].At), delay, "the second write waited for the first's answer")
}

func TestTheConversationRateLimit(t *testing.T) {
	cfg := gateConfig(true)
	cfg.ConversationRateLimit = RateLimit{WritesPerSecond: 0.001, Burst: 3}
	h := startGate(t, cfg, oh.StatusIdle)
	h.register()
	for i := range 5 {
		cmd := h.command(fmt.Sprintf("c%d", i), typeSendInput)
		cmd.Data = map[string]any{"text": "more"}
		h.gate.HandleCommand(context.Background(), nil, cmd, true)
		if i < 3 {
			h.await(t, "control.accepted", cmd.ID)
			h.await(t, "x.openhands.input.sent", cmd.ID)
			continue
		}
		ack := h.await(t, "control.rejected", cmd.ID)
		assert.Equal(t, reasonBusy, ack.Data["reason"])
		assert.Contains(t, ack.Data["detail"], "write rate limit is reached (0.001 writes per second, burst 3)")
	}
	assert.Len(t, h.stub.Writes(), 3)
}

func TestReadyWarnsWhenTheOpenGateIsUnbound(t *testing.T) {
	const noReceiver, noExporter = "the OpenHands control gate is ON but no openhands receiver names it (control: openhandscontrol/x): " +
		"no command can be routed to a conversation or acked",
		"the OpenHands control gate is ON but no aeprelay exporter names it (control: openhandscontrol/x): no command reaches it"
	for _, tc := range []struct {
		name                string
		enabled, recv, bind bool
		want                []string
	}{
		{name: "open, unbound", enabled: true, want: []string{noReceiver, noExporter}},
		{name: "open, no exporter", enabled: true, recv: true, want: []string{noExporter}},
		{name: "open, no receiver", enabled: true, bind: true, want: []string{noReceiver}},
		{name: "open, bound", enabled: true, recv: true, bind: true},
		{name: "closed", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := zapobserver.New(zap.WarnLevel)
			set := extensiontest.NewNopSettings(componentType)
			set.ID = component.NewIDWithName(componentType, "x")
			set.Logger = zap.New(core)
			ext, err := NewFactory().Create(context.Background(), set, gateConfig(tc.enabled))
			require.NoError(t, err)
			g := ext.(*gate)
			require.NoError(t, g.Start(context.Background(), componenttest.NewNopHost()))
			defer func() { require.NoError(t, g.Shutdown(context.Background())) }()
			if tc.recv {
				_, unregister := g.Register(observer{})
				defer unregister()
			}
			if tc.bind {
				g.Bind()
			}
			require.NoError(t, g.Ready())
			var got []string
			for _, e := range logs.FilterLevelExact(zap.WarnLevel).All() {
				if strings.Contains(e.Message, "names it") {
					got = append(got, e.Message)
				}
			}
			assert.Equal(t, tc.want, got)
			require.NoError(t, g.NotReady())
		})
	}
}
