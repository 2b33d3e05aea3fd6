package aeprelayexporter

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
)

// agentEvent is newEvent from another agent, in a session of its own.
func agentEvent(agent, session string, seq int64) *aep.Event {
	ev := newEvent(session, seq)
	ev.Agent = agent
	ev.Source = "aep://otelcol-test/agent/" + agent + "/session/" + session
	return ev
}

// linkAgents are the agents of the relay's live sockets, sorted.
func linkAgents(relay *aeprelaytest.Relay) []string {
	var agents []string
	for _, c := range relay.Connections() {
		agents = append(agents, c.Agent)
	}
	slices.Sort(agents)
	return agents
}

// awaitLinks waits until the relay's live sockets are those of agents.
func awaitLinks(t *testing.T, relay *aeprelaytest.Relay, agents ...string) {
	t.Helper()
	slices.Sort(agents)
	relay.Await(t, "links of "+strings.Join(agents, ", "), func(r *aeprelaytest.Relay) bool {
		return slices.Equal(linkAgents(r), agents)
	})
}

// connOf is the relay's live socket of agent.
func connOf(t *testing.T, relay *aeprelaytest.Relay, agent string) aeprelaytest.Conn {
	t.Helper()
	for _, c := range relay.Connections() {
		if c.Agent == agent {
			return c
		}
	}
	t.Fatalf("no live socket of agent %q", agent)
	return aeprelaytest.Conn{}
}

// fleetEvents interleaves three agents' sessions in one push.
func fleetEvents() []*aep.Event {
	return []*aep.Event{
		newEvent("s1", 0), agentEvent("codex", "c1", 0), newEvent("s1", 1),
		agentEvent("vscode", "v1", 0), agentEvent("codex", "c1", 1), newEvent("s1", 2),
	}
}

func TestSocketLinkPerAgent(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h, _ := startWithControl(t, relay, "control.pause")
	events := fleetEvents()

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))
	assert.ElementsMatch(t, ids(events), relayIDs(relay), "every agent's events arrive")
	for _, session := range []struct{ agent, session string }{{"openhands", "s1"}, {"codex", "c1"}, {"vscode", "v1"}} {
		var want []string
		for _, ev := range events {
			if ev.Session == session.session {
				want = append(want, ev.ID)
			}
		}
		var got []string
		for _, rec := range relay.SessionEvents("aep://otelcol-test/agent/"+session.agent+"/session/"+session.session, session.session) {
			got = append(got, rec.Event.ID)
		}
		assert.Equal(t, want, got, "session %s in order", session.session)
	}
	requireNoViolations(t, relay) // each event rode the link its agent's hello names

	assert.Equal(t, []string{"codex", "openhands", "vscode"}, linkAgents(relay))
	for _, c := range relay.Connections() {
		if c.Agent == "openhands" {
			assert.Equal(t, []string{"control.pause"}, c.Accepts, "the agent's link declares the gate's commands")
			continue
		}
		assert.Equal(t, []string{}, c.Accepts, "the link of %s declares no commands", c.Agent)
	}
	for _, hello := range relay.Hellos() {
		if hello.Agent != "openhands" {
			assert.NotContains(t, string(hello.Raw), `"emits"`, "another agent's categories are not known here")
			assert.Contains(t, string(hello.Raw), `"accepts":[]`)
		}
	}
	assert.Equal(t, int64(len(events)), h.counter(t, "otelcol_aeprelay_events_sent"))
	assert.Equal(t, int64(3), h.counter(t, "otelcol_aeprelay_batches_confirmed"), "one confirmation per link")
	assert.Equal(t, int64(3), h.counter(t, "otelcol_aeprelay_links"))
	assert.Equal(t, int64(0), h.counter(t, "otelcol_aeprelay_events_rejected"))
}

func TestSocketCommandsReachOnlyTheAgentLink(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h, control := startWithControl(t, relay, "control.pause")
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, agentEvent("codex", "c1", 0))))

	refusal, err := relay.SendCommand(commandEvent("cmd-1", "control.pause", "c1"))
	require.NoError(t, err)
	require.NotNil(t, refusal)
	assert.Equal(t, "unsupported", refusal.Code, "the codex link declares accepts: []")

	// A relay that routes one to the codex link anyway: logged and
	// counted, never handed to the gate.
	require.NoError(t, relay.SendFrame(connOf(t, relay, "codex").ID, commandEvent("cmd-2", "control.pause", "c1")))
	eventually(t, "the command on the codex link to be counted", func() bool {
		return h.counter(t, "otelcol_aeprelay_commands_received", attribute.String("outcome", "unhandled")) == 1
	})
	entries := h.logged("received a command on the link of another agent, which declares accepts: []; commands reach only the link of agent")
	require.Len(t, entries, 1)
	assert.Equal(t, "codex", entries[0].ContextMap()["link_agent"])
	assert.Equal(t, "cmd-2", entries[0].ContextMap()["id"])
	assert.Empty(t, control.commands, "the gate never saw it")
	assert.Equal(t, int64(0), h.counter(t, "otelcol_aeprelay_commands_received", attribute.String("outcome", "handled")))
}

func TestSocketMaxLinksOneSendsOnlyTheAgent(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	cfg := socketConfig(relay)
	cfg.MaxLinks = 1
	h := startExporter(t, cfg, nil)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, fleetEvents()...)))
	assert.Equal(t, []string{"ev-s1-0000", "ev-s1-0001", "ev-s1-0002"}, relayIDs(relay))
	assert.Equal(t, []string{"openhands"}, linkAgents(relay))
	requireNoViolations(t, relay)
	assert.Equal(t, int64(3), h.counter(t, "otelcol_aeprelay_events_rejected", attribute.String("reason", reasonAgentMismatch)))
	entries := h.logged("dropping an AEP event that can never be sent")
	require.NotEmpty(t, entries)
	assert.Contains(t, entries[0].ContextMap()["error"], "raise max_links, or set transport: http", "the log line says what to change")
}

func TestSocketMaxLinksClosesTheLeastRecentlyUsed(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	cfg := socketConfig(relay)
	cfg.MaxLinks = 2
	h := startExporter(t, cfg, nil)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, agentEvent("codex", "c1", 0))))
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, agentEvent("vscode", "v1", 0))))
	awaitLinks(t, relay, "openhands", "vscode")
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_links_evicted"))

	// One push with more agents than links: it goes out a few links at a
	// time, every event once.
	events := []*aep.Event{
		agentEvent("codex", "c1", 1), newEvent("s1", 0), agentEvent("vscode", "v1", 1),
		agentEvent("claude-code", "k1", 0), agentEvent("codex", "c1", 2),
	}
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))
	assert.ElementsMatch(t, append([]string{"ev-c1-0000", "ev-v1-0000"}, ids(events)...), relayIDs(relay))
	requireNoViolations(t, relay)
	eventually(t, "the closed links to be counted", func() bool { return h.counter(t, "otelcol_aeprelay_links") <= 2 })
	assert.NotEmpty(t, h.logged("max_links AEP relay links are open: closing the least recently used to open one for another agent; raise max_links if this repeats"))
}

func TestSocketClosesIdleLinks(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	cfg := socketConfig(relay)
	cfg.LinkIdleTimeout = 50 * time.Millisecond
	h := startExporter(t, cfg, nil)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, agentEvent("codex", "c1", 0))))
	awaitLinks(t, relay, "openhands")
	eventually(t, "the idle link to be counted closed", func() bool {
		return h.counter(t, "otelcol_aeprelay_links") == 1
	})

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, agentEvent("codex", "c1", 1))))
	assert.Equal(t, []string{"ev-c1-0000", "ev-c1-0001"}, relayIDs(relay), "the next event opens the link again")
	assert.Equal(t, int64(0), h.counter(t, "otelcol_aeprelay_links_evicted"))
	requireNoViolations(t, relay)
}

func TestSocketRetriesOnlyTheUnconfirmedPart(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	relay.SetPong(aeprelaytest.PongMode{Never: true, Agent: "codex"})
	cfg := socketConfig(relay)
	cfg.ConfirmTimeout = time.Second
	h := startExporter(t, cfg, nil)
	events := fleetEvents()

	err := h.consume(t, aeptest.LogsOf(t, events...))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "did not confirm 2 events within confirm_timeout (1s)")
	var retry consumererror.Logs
	require.True(t, errors.As(err, &retry), "the push carries what is left: %v", err)
	var left []string
	for _, ev := range aeptest.EventsOf(t, retry.Data()) {
		left = append(left, ev.ID)
	}
	assert.Equal(t, []string{"ev-c1-0000", "ev-c1-0001"}, left, "only codex's part, unconfirmed, is retried")
	assert.Equal(t, int64(4), h.counter(t, "otelcol_aeprelay_events_sent"), "the confirmed parts count as sent")

	relay.SetPong(aeprelaytest.PongMode{})
	require.NoError(t, h.consume(t, retry.Data()))
	assert.ElementsMatch(t, ids(events), relayIDs(relay))
	assert.Equal(t, int64(len(events)), h.counter(t, "otelcol_aeprelay_events_sent"))
	requireNoViolations(t, relay)
}

func TestSocketRelayRefusalOnAnotherAgentsLink(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{Refuse: func(ev *aep.Event) error {
		if ev.ID == "ev-c1-0001" {
			return errors.New("policy: refused")
		}
		return nil
	}})
	h := startExporter(t, socketConfig(relay), nil)
	events := fleetEvents()

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_rejected", attribute.String("reason", reasonRelayRefused)))
	assert.Equal(t, int64(len(events)-1), h.counter(t, "otelcol_aeprelay_events_sent"))
	assert.Equal(t, int64(0), h.counter(t, "otelcol_aeprelay_unmatched_errors"), "the refusal landed on the codex link's batch")
}

// TestSocketFailedPartHoldsItsAgentBack: a push with more agents than
// links finishes its parts a few at a time; once an agent's part failed,
// the agent's later events in the push wait for the retry behind it,
// never overtaking it on a fresh link.
func TestSocketFailedPartHoldsItsAgentBack(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	relay.SetPong(aeprelaytest.PongMode{Never: true, Agent: "codex"})
	cfg := socketConfig(relay)
	cfg.MaxLinks = 2
	cfg.ConfirmTimeout = time.Second
	h := startExporter(t, cfg, nil)

	// codex's second event is in the push's second chunk.
	events := []*aep.Event{agentEvent("codex", "c1", 0)}
	for i := range writeChunk {
		events = append(events, agentEvent("vscode", "v1", int64(i)))
	}
	events = append(events, agentEvent("codex", "c1", 1))
	err := h.consume(t, aeptest.LogsOf(t, events...))
	var retry consumererror.Logs
	require.True(t, errors.As(err, &retry), "the push carries what is left: %v", err)
	var left []string
	for _, ev := range aeptest.EventsOf(t, retry.Data()) {
		left = append(left, ev.ID)
	}
	assert.Equal(t, []string{"ev-c1-0000", "ev-c1-0001"}, left)
	assert.NotContains(t, relayIDs(relay), "ev-c1-0001", "codex's later event never left ahead of its failed part")

	relay.SetPong(aeprelaytest.PongMode{})
	require.NoError(t, h.consume(t, retry.Data()))
	assert.ElementsMatch(t, ids(events), relayIDs(relay))
	requireNoViolations(t, relay)
}

// TestSocketAnotherAgentCannotClaimTheAgentsSession: the relay routes a
// command by its session alone, to the one connection that carried the
// session. An event of another agent in a session the agent's link carries
// (from a data path: an OTLP export, an aep POST) would make a second
// claimant on its own link, and every command for the session would be
// refused as ambiguous: it is dropped, counted, and the session's commands
// still reach the gate.
func TestSocketAnotherAgentCannotClaimTheAgentsSession(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h, control := startWithControl(t, relay, "control.pause")
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, agentEvent("codex", "s1", 0), agentEvent("codex", "c1", 0))))
	assert.Equal(t, []string{"ev-s1-0000", "ev-c1-0000"}, relayIDs(relay), "the codex event of s1 is not sent")
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_rejected", attribute.String("reason", reasonSessionClaimed)))
	assert.NotEmpty(t, h.logged("dropping an AEP event that can never be sent"))

	refusal, err := relay.SendCommand(commandEvent("cmd-1", "control.pause", "s1"))
	require.NoError(t, err)
	require.Nil(t, refusal, "the agent's link is the one claimant of s1")
	select {
	case got := <-control.commands:
		assert.Equal(t, "cmd-1", got.ev.ID)
	case <-time.After(testTimeout):
		t.Fatal("the control extension never received the command")
	}
}

// TestSocketWithoutControlSendsEverySession: without a control extension
// no command is taken, so no session is kept from another agent.
func TestSocketWithoutControlSendsEverySession(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startExporter(t, socketConfig(relay), nil)
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, agentEvent("codex", "s1", 0))))
	assert.Len(t, relayIDs(relay), 2)
	assert.Equal(t, int64(0), h.counter(t, "otelcol_aeprelay_events_rejected", attribute.String("reason", reasonSessionClaimed)))
}
