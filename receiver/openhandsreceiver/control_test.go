package openhandsreceiver

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

func TestStartNeedsTheNamedControlExtension(t *testing.T) {
	id := component.MustNewID("openhandscontrol")
	for _, tc := range []struct {
		name       string
		extensions map[component.ID]component.Component
		want       string
	}{
		{"not configured", nil, `control: extension "openhandscontrol" is not configured in service::extensions`},
		{"not a control extension", map[component.ID]component.Component{id: hosttest.Inert{}}, "is not an openhandscontrol extension"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Servers = []ServerConfig{{}}
			cfg.Servers[0].Endpoint = "http://127.0.0.1:1"
			cfg.Control = &id
			r, err := newReceiver(cfg, receivertest.NewNopSettings(componentType), consumertest.NewNop())
			require.NoError(t, err)
			err = r.Start(context.Background(), hosttest.Extensions(tc.extensions))
			assert.ErrorContains(t, err, tc.want)
			require.NoError(t, r.Shutdown(context.Background()))
		})
	}
}

func TestSessionIndexKeepsEveryServersClaim(t *testing.T) {
	prod, dev := &sessionSettings{server: &serverClient{}}, &sessionSettings{server: &serverClient{}}
	a, b := &session{id: "x", sessionSettings: prod}, &session{id: "x", sessionSettings: dev}
	x := newSessionIndex()
	x.add(a)
	x.add(b)
	assert.Equal(t, []openhandscontrol.Session{a, b}, x.Sessions("x"), "both claims, in the order observed")
	a2 := &session{id: "x", sessionSettings: prod}
	x.add(a2)
	assert.Equal(t, []openhandscontrol.Session{a2, b}, x.Sessions("x"), "one entry per (server, conversation)")
	x.remove(a) // an entry already replaced
	x.remove(b)
	assert.Equal(t, []openhandscontrol.Session{a2}, x.Sessions("x"), "removing one claim never hides the other")
	x.remove(a2)
	assert.Empty(t, x.Sessions("x"))
	assert.Empty(t, x.sessions)
}

var gateID = component.MustNewID("openhandscontrol")

// commandHandler is how the aeprelay exporter hands the gate a command.
type commandHandler interface {
	HandleCommand(ctx context.Context, raw []byte, ev *aep.Event, authenticated bool)
}

// startOpenGate starts an open control gate: the extension, and the
// exporter's side of it.
func startOpenGate(t testing.TB) (component.Component, commandHandler) {
	t.Helper()
	gateCfg := openhandscontrol.NewFactory().CreateDefaultConfig().(*openhandscontrol.Config)
	gateCfg.Enabled = true
	ext, err := openhandscontrol.NewFactory().Create(context.Background(), extensiontest.NewNopSettings(gateID.Type()), gateCfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return ext, ext.(commandHandler)
}

// TestTwoServersListingOneIDNeverShareCommands: prod and dev both list
// conversation X; a command for X is written to neither, and once dev
// deletes X it goes to prod, with prod's key.
func TestTwoServersListingOneIDNeverShareCommands(t *testing.T) {
	prodStub := oh.Start(t, oh.Config{SessionAPIKeys: []string{"prod-key"}})
	devStub := oh.Start(t, oh.Config{SessionAPIKeys: []string{"dev-key"}})
	prod, err := prodStub.CreateConversation(oh.ConversationOptions{Status: oh.StatusRunning})
	require.NoError(t, err)
	dev, err := devStub.CreateConversation(oh.ConversationOptions{ID: prod.ID(), Status: oh.StatusRunning})
	require.NoError(t, err)

	ext, gate := startOpenGate(t)
	cfg := fastConfig(socketSession, prodStub, devStub)
	cfg.Servers[0].SessionAPIKey, cfg.Servers[0].Name = "prod-key", "prod"
	cfg.Servers[1].SessionAPIKey, cfg.Servers[1].Name = "dev-key", "dev"
	cfg.Control = &gateID
	h := startHarnessWith(t, cfg, map[component.ID]component.Component{gateID: ext})
	waitSockets(t, prod, 1)
	waitSockets(t, dev, 1)

	command := func(id string) *aep.Event {
		return &aep.Event{AEP: aep.Version, ID: id, Type: "control.pause", Source: "aep://ops", Agent: "ops", Session: prod.ID()}
	}
	ack := func(cmd string) *aep.Event {
		var found *aep.Event
		require.Eventually(t, func() bool {
			for _, ev := range h.session(prod.ID()) {
				if ev.Cause == cmd && strings.HasPrefix(ev.Type, "control.") {
					found = ev
					return true
				}
			}
			return false
		}, waitFor, tick, "no ack of %s", cmd)
		return found
	}

	gate.HandleCommand(context.Background(), nil, command("c1"), true)
	refused := ack("c1")
	assert.Equal(t, "control.rejected", refused.Type)
	assert.Equal(t, "refused", refused.Data["reason"])
	assert.Empty(t, prodStub.Writes())
	assert.Empty(t, devStub.Writes(), "never written with dev's key")

	require.NoError(t, dev.Delete())
	devHost := strings.TrimPrefix(devStub.URL(), "http://")
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(h.session(prod.ID()), func(ev *aep.Event) bool {
			return ev.Type == "session.ended" && strings.Contains(ev.Source, devHost)
		})
	}, waitFor, tick, "dev's conversation never ended")

	gate.HandleCommand(context.Background(), nil, command("c2"), true)
	assert.Equal(t, "control.accepted", ack("c2").Type, "prod's conversation is still observed")
	writes := prodStub.Writes()
	require.Len(t, writes, 1)
	assert.Equal(t, "prod-key", writes[0].Header.Get("X-Session-API-Key"))
	assert.Empty(t, devStub.Writes())
}

// TestARedeliveryAfterARestartGetsTheStoredAck: with storage, a
// send_input is written and acked, the collector restarts (receiver and
// gate), and the relay redelivers the command: the recorded ack leaves
// again unchanged, and the agent server gets no second write.
func TestARedeliveryAfterARestartGetsTheStoredAck(t *testing.T) {
	stub := startStub(t)
	conv := createConversation(t, stub)
	mem := newMemStorage(nil)
	input := &aep.Event{
		AEP: aep.Version, ID: "c1", Type: "x.openhands.control.send_input", Source: "aep://ops", Agent: "ops",
		Session: conv.ID(), Data: map[string]any{"text": "also run the linter"},
	}
	run := func() (*harness, commandHandler) {
		ext, gate := startOpenGate(t)
		cfg := storageConfig(socketSession, stub)
		cfg.Control = &gateID
		extensions := mem.extensions()
		extensions[gateID] = ext
		h := startHarnessWith(t, cfg, extensions)
		h.waitLive(conv, 1)
		return h, gate
	}
	acks := func(h *harness) []string {
		var out []string
		for _, ev := range h.session(conv.ID()) {
			if ev.Type == "control.accepted" && ev.Cause == input.ID {
				raw, err := json.Marshal(ev)
				require.NoError(t, err)
				out = append(out, string(raw))
			}
		}
		return out
	}

	h1, gate := run()
	gate.HandleCommand(context.Background(), nil, input, true)
	require.Eventually(t, func() bool { return len(acks(h1)) == 1 }, waitFor, tick, "no ack")
	recorded := acks(h1)
	require.NoError(t, h1.rcv.Shutdown(context.Background()))

	h2, gate := run()
	gate.HandleCommand(context.Background(), nil, input, true)
	require.Eventually(t, func() bool { return len(acks(h2)) == 1 }, waitFor, tick, "no re-ack")
	assert.Equal(t, recorded, acks(h2), "the recorded ack, byte for byte")
	assert.Len(t, stub.Writes(), 1, "written once")
}

// TestTheStreamShowingASendInputAcksIt: the agent server appends the
// message at once but answers late; the user message the stream shows
// acks the send_input and emits its input.sent, before the answer.
func TestTheStreamShowingASendInputAcksIt(t *testing.T) {
	stub := startStub(t)
	conv := createConversation(t, stub)
	ext, gate := startOpenGate(t)
	cfg := fastConfig(socketSession, stub)
	cfg.Control = &gateID
	h := startHarnessWith(t, cfg, map[component.ID]component.Component{gateID: ext})
	h.waitLive(conv, 1)
	stub.SetWriteFault(oh.WriteFault{AnswerDelay: time.Hour})
	gate.HandleCommand(context.Background(), nil, &aep.Event{
		AEP: aep.Version, ID: "c1", Type: "x.openhands.control.send_input", Source: "aep://ops", Agent: "ops",
		Session: conv.ID(), Data: map[string]any{"text": "also run the linter"},
	}, true)
	var evs []*aep.Event
	require.Eventually(t, func() bool {
		evs = h.session(conv.ID())
		return slices.ContainsFunc(evs, func(ev *aep.Event) bool { return ev.Type == "x.openhands.message.event" })
	}, waitFor, tick, "the message never showed")
	i := slices.IndexFunc(evs, func(ev *aep.Event) bool { return ev.Cause == "c1" })
	require.GreaterOrEqual(t, i, 0, "no ack before the answer: %v", types(evs))
	require.Greater(t, len(evs), i+2)
	assert.Equal(t, []string{"control.accepted", "x.openhands.input.sent", "x.openhands.message.event"}, types(evs[i:i+3]))
	assert.Equal(t, "c1", evs[i+1].Cause)
	assert.Equal(t, "user", evs[i+2].Data["role"])
}
