//go:build live

package livetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/fakellm"
)

// ackWindow is the gated collector's declared ack window.
const ackWindow = 10 * time.Second

// controlWrites are the only REST writes the open gate may make, by path
// suffix under /api/conversations/{id}.
var controlWrites = []string{"/events/respond_to_confirmation", "/pause", "/run", "/events", "/interrupt"}

// gated is a collector with the control gate open, behind its own Front
// and relay: an operator drives the real agent server through it.
type gated struct {
	t      *testing.T
	server *agentServer
	llm    *fakellm.Server
	rec    *Recorder
	relay  *aeprelaytest.Relay
	col    *collectorProcess
}

// TestLiveControl drives every verb of the control gate against the real
// agent server: approve and deny a pending action, pause and resume a
// running conversation, interrupt one, send input to an idle one. Each ack
// must arrive within the declared window, each outcome be cause-linked,
// and each guard refuse where the status says it must, without a write.
func TestLiveControl(t *testing.T) {
	python, bin, llm := liveTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := &gated{t: t, server: startAgentServer(t, python), llm: llm}
	var front *Front
	g.rec, front = startRecordedFront(t, g.server.url)
	g.relay = aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken})
	g.col = startCollectorProcess(t, bin, gatedConfig(front.ProxyURL(), g.relay.URL(), ""))
	logOnFailure(t, g.server, g.col)

	t.Run("approve", func(t *testing.T) {
		id := g.open(ctx, conversationSpec{script: "confirm_accept", confirm: true})
		request := g.awaitEvent(ctx, id, "attention.requested", "")
		assert.Equal(t, []any{"control"}, request.Data["respond_via"])
		g.refused(ctx, id, "control.resume", "", nil, "answer the pending request with control.attention.respond")
		respond := g.command(ctx, id, "control.attention.respond", request.ID, map[string]any{"answer": map[string]any{"option": "approve"}})
		g.accepted(ctx, id, respond)
		answered := g.awaitEvent(ctx, id, "attention.answered", respond)
		assert.Equal(t, request.ID, answered.Subject)
		g.awaitEvent(ctx, id, "attention.resolved", respond)
		g.awaitStatus(ctx, id, "finished")
	})
	t.Run("deny, then input to the idle conversation", func(t *testing.T) {
		id := g.open(ctx, conversationSpec{script: "confirm_reject", confirm: true})
		request := g.awaitEvent(ctx, id, "attention.requested", "")
		respond := g.command(ctx, id, "control.attention.respond", request.ID,
			map[string]any{"answer": map[string]any{"option": "deny", "text": "not on this machine"}})
		g.accepted(ctx, id, respond)
		answered := g.awaitEvent(ctx, id, "attention.answered", respond)
		assert.Equal(t, "deny", answered.Data["answer"].(map[string]any)["option"])
		g.awaitEvent(ctx, id, "attention.resolved", respond)
		g.awaitStatus(ctx, id, "idle")
		g.refused(ctx, id, "control.pause", "", nil, "its status is idle")
		g.refused(ctx, id, "control.resume", "", nil, "only from paused")
		input := g.command(ctx, id, "x.openhands.control.send_input", "", map[string]any{"text": "Leave a note in NOTES.md instead."})
		g.accepted(ctx, id, input)
		g.awaitEvent(ctx, id, "x.openhands.input.sent", input)
		g.awaitEvent(ctx, id, "x.openhands.message.event", "")
		time.Sleep(time.Second)
		assert.Equal(t, "idle", g.status(ctx, id), "send_input never starts a run")
	})
	t.Run("pause and resume", func(t *testing.T) {
		id := g.open(ctx, conversationSpec{script: "long"})
		g.awaitStatus(ctx, id, "running")
		pause := g.command(ctx, id, "control.pause", "", nil)
		g.accepted(ctx, id, pause)
		g.awaitEvent(ctx, id, "state.delta", pause)
		g.awaitStatus(ctx, id, "paused")
		g.refused(ctx, id, "x.openhands.control.interrupt", "", nil, "its status is paused")
		resume := g.command(ctx, id, "control.resume", "", nil)
		g.accepted(ctx, id, resume)
		g.awaitEvent(ctx, id, "state.delta", resume)
		g.awaitStatus(ctx, id, "finished")
	})
	t.Run("interrupt", func(t *testing.T) {
		id := g.open(ctx, conversationSpec{script: "interrupt"})
		require.NoError(t, awaitEvent("ActionEvent", "sleep 30")(ctx, &live{server: g.server}, id))
		interrupt := g.command(ctx, id, "x.openhands.control.interrupt", "", nil)
		g.accepted(ctx, id, interrupt)
		g.awaitEvent(ctx, id, "state.delta", interrupt)
		g.awaitStatus(ctx, id, "paused")
		resume := g.command(ctx, id, "control.resume", "", nil)
		g.accepted(ctx, id, resume)
		g.awaitStatus(ctx, id, "finished")
	})

	for _, v := range g.relay.Violations() {
		t.Errorf("relay violation: %s", v)
	}
	assertOnlyControlWrites(t, g.rec.Transcript())
}

// gatedConfig is one collector: an auto-socket receiver at capture
// redacted (so refusal details ride) registered with an open gate, and a
// relay exporter naming the same gate; policy, when set, is the aeppolicy
// processor's configuration (indented YAML lines), run before batch.
func gatedConfig(proxyURL, relay, policy string) string {
	processors := "batch"
	if policy != "" {
		processors, policy = "aeppolicy, batch", "  aeppolicy:\n"+policy+"\n"
	}
	return fmt.Sprintf(`extensions:
  openhandscontrol:
    enabled: true
    ack_window: %s
receivers:
  openhands:
%s    control: openhandscontrol
processors:
%s  batch:
    timeout: 50ms
exporters:
  aeprelay:
    endpoint: %s
    token: %s
    instance: live/control
    control: openhandscontrol
service:
  extensions: [openhandscontrol]
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [openhands]
      processors: [%s]
      exporters: [aeprelay]
`, ackWindow, Indent(ReceiverYAML("auto", aep.CaptureRedacted, proxyURL), 4), policy, relay, relayToken, processors)
}

// open creates a conversation, waits for the gated receiver to attach and
// sends its first message.
func (g *gated) open(ctx context.Context, spec conversationSpec) string {
	g.t.Helper()
	id, err := g.server.createConversation(ctx, g.llm.BaseURL(), spec)
	require.NoError(g.t, err)
	require.NoError(g.t, poll(ctx, "the gated receiver attached", func() (bool, error) { return g.rec.Attached(id), nil }))
	// The claim: the relay routes commands only once the session flowed.
	g.awaitEvent(ctx, id, "session.started", "")
	require.NoError(g.t, g.server.sendMessage(ctx, id, "Please do the task. [[script:"+spec.script+"]]"))
	return id
}

// command sends one command as an operator would and returns its id.
func (g *gated) command(ctx context.Context, session, typ, subject string, data map[string]any) string {
	g.t.Helper()
	id := aep.DeterministicID(time.Now(), session+typ+subject+time.Now().String())
	capture := aep.CaptureMetadata
	if data != nil {
		capture = aep.CaptureRedacted
	}
	raw, err := json.Marshal(aep.Event{
		AEP: aep.Version, ID: id, Type: typ, Subject: subject, Source: "aep://ops.test/agent/live-operator",
		Agent: "live-operator", Time: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		Session: session, Capture: capture, Data: data,
	})
	require.NoError(g.t, err)
	refusal, err := g.relay.SendCommand(raw)
	require.NoError(g.t, err)
	require.Nil(g.t, refusal, "the relay refused %s", typ)
	return id
}

// ack waits for the command's ack, which must come within the window.
func (g *gated) ack(ctx context.Context, session, command string) *aep.Event {
	g.t.Helper()
	sent := time.Now()
	var ack *aep.Event
	require.NoError(g.t, poll(ctx, "the ack of "+command, func() (bool, error) {
		for _, ev := range g.events(session) {
			if (ev.Type == "control.accepted" || ev.Type == "control.rejected") && ev.Cause == command {
				ack = ev
				return true, nil
			}
		}
		return false, nil
	}))
	took := time.Since(sent)
	assert.LessOrEqual(g.t, took, ackWindow, "the ack of %s arrived outside the declared window", command)
	g.t.Logf("%s %s within %s", ack.Type, command, took.Round(time.Millisecond))
	return ack
}

func (g *gated) accepted(ctx context.Context, session, command string) {
	g.t.Helper()
	ack := g.ack(ctx, session, command)
	require.Equal(g.t, "control.accepted", ack.Type, "%v", ack.Data)
}

// refused sends a command the guards must refuse, and checks that no
// write reached the server for it.
func (g *gated) refused(ctx context.Context, session, typ, subject string, data map[string]any, detail string) {
	g.t.Helper()
	before := len(g.writes())
	ack := g.ack(ctx, session, g.command(ctx, session, typ, subject, data))
	require.Equal(g.t, "control.rejected", ack.Type)
	assert.Equal(g.t, "refused", ack.Data["reason"])
	assert.Contains(g.t, ack.Data["detail"], detail)
	assert.Len(g.t, g.writes(), before, "a refused command writes nothing")
}

// awaitEvent waits for an event of typ in the session, caused by cause
// unless cause is "".
func (g *gated) awaitEvent(ctx context.Context, session, typ, cause string) *aep.Event {
	g.t.Helper()
	var found *aep.Event
	require.NoError(g.t, poll(ctx, typ+" caused by "+cause, func() (bool, error) {
		for _, ev := range g.events(session) {
			if ev.Type == typ && (cause == "" || ev.Cause == cause) {
				found = ev
				return true, nil
			}
		}
		return false, nil
	}))
	return found
}

func (g *gated) awaitStatus(ctx context.Context, session, status string) {
	g.t.Helper()
	require.NoError(g.t, poll(ctx, "status "+status, func() (bool, error) {
		s, err := g.server.status(ctx, session)
		return s == status, err
	}))
}

func (g *gated) status(ctx context.Context, session string) string {
	s, err := g.server.status(ctx, session)
	require.NoError(g.t, err)
	return s
}

func (g *gated) events(session string) []*aep.Event {
	var out []*aep.Event
	for _, rec := range g.relay.Events() {
		if rec.Event.Session == session && rec.Event.Seq != nil {
			out = append(out, rec.Event)
		}
	}
	return out
}

// writes are the REST requests other than GET that crossed the Front.
func (g *gated) writes() []Exchange {
	var out []Exchange
	for _, ex := range g.rec.Transcript().REST {
		if ex.Method != "GET" {
			out = append(out, ex)
		}
	}
	return out
}

// assertOnlyControlWrites: the socket stays auth-frame-only under the open
// gate, and every REST write is one of the five.
func assertOnlyControlWrites(t *testing.T, tr *Transcript) {
	for _, ex := range tr.REST {
		if ex.Method == "GET" {
			continue
		}
		assert.Equal(t, "POST", ex.Method, ex.Path)
		assert.True(t, strings.HasPrefix(ex.Path, "/api/conversations/") &&
			slices.ContainsFunc(controlWrites, func(w string) bool { return strings.HasSuffix(ex.Path, w) }),
			"a write outside the five: %s %s", ex.Method, ex.Path)
	}
	for _, s := range tr.Sockets {
		for _, f := range s.FromReceiver {
			var auth struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(f, &auth); err != nil || auth.Type != "auth" {
				t.Errorf("the gated receiver wrote a frame that is not an auth frame to %s: %s", s.Path, f)
			}
		}
	}
}
