package aeprelayexporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
)

const relayToken = "relay-token"

// startRelay starts the test relay with a token, so that it routes
// commands.
func startRelay(t testing.TB, cfg aeprelaytest.Config) *aeprelaytest.Relay {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = relayToken
	}
	return aeprelaytest.Start(t, cfg)
}

func socketConfig(relay *aeprelaytest.Relay) *Config {
	cfg := testConfig(relay.URL())
	cfg.Token = relayToken
	return cfg
}

func awaitConnected(t *testing.T, relay *aeprelaytest.Relay) aeprelaytest.Conn {
	t.Helper()
	relay.Await(t, "the exporter's hello", func(r *aeprelaytest.Relay) bool {
		conns := r.Connections()
		return len(conns) == 1 && conns[0].Agent != ""
	})
	return relay.Connections()[0]
}

func relayIDs(relay *aeprelaytest.Relay) []string {
	var out []string
	for _, rec := range relay.Events() {
		out = append(out, rec.Event.ID)
	}
	return out
}

func countFrames(relay *aeprelaytest.Relay, frameType string) int {
	n := 0
	for _, f := range relay.Frames() {
		if f.Type == frameType {
			n++
		}
	}
	return n
}

func requireNoViolations(t *testing.T, relay *aeprelaytest.Relay) {
	t.Helper()
	for _, v := range relay.Violations() {
		t.Errorf("relay saw a violation: %s", v)
	}
}

func TestSocketHello(t *testing.T) {
	controlID := component.MustNewID("openhandscontrol")
	tests := []struct {
		name        string
		control     *fakeControl
		maxCapture  aep.Capture
		wantAccepts []string
		wantWindow  int64
		wantCapture []aep.Capture
	}{
		{
			name:        "without_control_accepts_nothing",
			wantAccepts: []string{},
			wantWindow:  10000,
			wantCapture: []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull},
		},
		{
			name:        "with_control_declares_its_accepts",
			control:     newFakeControl("control.pause", "control.resume"),
			maxCapture:  aep.CaptureMetadata,
			wantAccepts: []string{"control.pause", "control.resume"},
			wantWindow:  5000,
			wantCapture: []aep.Capture{aep.CaptureNone, aep.CaptureMetadata},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			relay := startRelay(t, aeprelaytest.Config{})
			cfg := socketConfig(relay)
			cfg.MaxCapture = tt.maxCapture
			host := newTestHost()
			if tt.control != nil {
				cfg.Control = &controlID
				host.extensions[controlID] = tt.control
			}
			startExporter(t, cfg, host)
			awaitConnected(t, relay)

			hellos := relay.Hellos()
			require.Len(t, hellos, 1)
			var hello helloFrame
			require.NoError(t, json.Unmarshal(hellos[0].Raw, &hello))
			assert.Equal(t, helloFrame{
				Type:     "hello",
				Versions: []string{"0.1"},
				Role:     "emitter",
				Identity: helloIdentity{Agent: "openhands", Instance: "otelcol-test/1"},
				Capabilities: helloCapabilities{
					Emits:   []string{"session", "run", "tool", "attention", "error", "state", "control"},
					Capture: tt.wantCapture,
					Control: controlCapability{Accepts: tt.wantAccepts, AckWindowMS: tt.wantWindow},
				},
			}, hello)
			if len(tt.wantAccepts) == 0 {
				assert.Contains(t, string(hellos[0].Raw), `"accepts":[]`, "accepts must be an empty list, not null")
			}
			requireNoViolations(t, relay)
		})
	}
}

func TestSocketSendsOneFramePerEventInOrder(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startExporter(t, socketConfig(relay), nil)

	// Two sessions interleaved: the order across sessions is the records'.
	var events []*aep.Event
	for i := range 10 {
		events = append(events, newEvent("s1", int64(i)), newEvent("s2", int64(i)))
	}
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))

	// The push returned after the pong: everything is already in.
	records := relay.Events()
	require.Len(t, records, len(events))
	assert.Equal(t, len(events), relay.Received())
	for i, rec := range records {
		want, err := events[i].MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, string(want), string(rec.Raw), "event %d must travel alone, in wire form", i)
		assert.Equal(t, aeprelaytest.BindingSocket, rec.Binding)
	}
	frames := relay.Frames()
	require.NotEmpty(t, frames)
	last := frames[len(frames)-1]
	assert.Equal(t, "ping", last.Type, "the batch is followed by its confirming ping")
	requireNoViolations(t, relay)

	assert.Equal(t, int64(len(events)), h.counter(t, "otelcol_aeprelay_events_sent", attribute.String("transport", "websocket")))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_batches_confirmed"))
	assert.Equal(t, uint64(1), h.histogramCount(t, "otelcol_aeprelay_confirm_latency"))
}

func TestSocketDownlevelsAboveMaxCapture(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	cfg := socketConfig(relay)
	cfg.MaxCapture = aep.CaptureRedacted
	h := startExporter(t, cfg, nil)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, attentionRequest("s1", 0))))
	records := relay.Events()
	require.Len(t, records, 1)
	got := records[0].Event
	assert.Equal(t, aep.CaptureMetadata, got.Capture, "a mechanical hop never mints redacted")
	assert.Equal(t, "openhands requests permission: Bash", got.Data["prompt"])
	requireNoViolations(t, relay)
}

func TestSocketDropsWhatCannotBeSent(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startExporter(t, socketConfig(relay), nil)
	invalid := newEvent("s1", 1)
	invalid.Seq = nil
	ld := aeptest.LogsOf(t, newEvent("s1", 0), invalid, newEvent("s1", 2))
	appendForeignRecord(ld)

	require.NoError(t, h.consume(t, ld))
	assert.Equal(t, []string{"ev-s1-0000", "ev-s1-0002"}, relayIDs(relay))
	requireNoViolations(t, relay)
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_skipped"))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_rejected", attribute.String("reason", reasonInvalid)))
}

func TestSocketWaitsForThePong(t *testing.T) {
	const delay = 200 * time.Millisecond
	relay := startRelay(t, aeprelaytest.Config{})
	h := startExporter(t, socketConfig(relay), nil)
	awaitConnected(t, relay)
	relay.SetPong(aeprelaytest.PongMode{Delay: delay})

	start := time.Now()
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))
	assert.GreaterOrEqual(t, time.Since(start), delay, "the push must not return before the relay's pong")
}

func TestSocketNoPongIsRetryable(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	cfg := socketConfig(relay)
	cfg.ConfirmTimeout = 200 * time.Millisecond
	h := startExporter(t, cfg, nil)
	awaitConnected(t, relay)
	relay.SetPong(aeprelaytest.PongMode{Never: true})
	events := sessionEvents("s1", 3)
	ld := aeptest.LogsOf(t, events...)

	err := h.consume(t, ld)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err), "a missing pong must be retryable: %v", err)
	assert.Contains(t, err.Error(), "confirm_timeout")

	relay.SetPong(aeprelaytest.PongMode{})
	require.NoError(t, h.consume(t, ld))
	assert.Equal(t, ids(events), relayIDs(relay))
	assert.Equal(t, 2*len(events), relay.Received(), "the retry resends the same ids")
	requireNoViolations(t, relay)
}

func TestSocketResendsAfterFailure(t *testing.T) {
	tests := []struct {
		name string
		// fault breaks the first attempt once when holds.
		when  func(*aeprelaytest.Relay) bool
		fault func(*aeprelaytest.Relay)
	}{
		{
			name: "no_pong",
			// The exporter gave up on the pong and redialled.
			when:  func(r *aeprelaytest.Relay) bool { return len(r.Hellos()) == 2 },
			fault: func(*aeprelaytest.Relay) {},
		},
		{
			name:  "dropped_socket_mid_batch",
			when:  func(r *aeprelaytest.Relay) bool { return r.Received() >= 5 },
			fault: (*aeprelaytest.Relay).DropConnections,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			relay := startRelay(t, aeprelaytest.Config{})
			cfg := withRetry(socketConfig(relay))
			cfg.ConfirmTimeout = 300 * time.Millisecond
			h := startExporter(t, cfg, nil)
			awaitConnected(t, relay)
			relay.SetPong(aeprelaytest.PongMode{Never: true})
			events := sessionEvents("s1", 20)

			faulted := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				err := relay.WaitFor(ctx, tt.when)
				tt.fault(relay)
				relay.SetPong(aeprelaytest.PongMode{})
				faulted <- err
			}()
			require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))
			require.NoError(t, <-faulted)

			assert.Equal(t, ids(events), relayIDs(relay), "every event arrives once, in order")
			assert.Greater(t, relay.Received(), len(events), "the unconfirmed batch was resent")
			assert.GreaterOrEqual(t, len(relay.Hellos()), 2, "the exporter redialled")
			assert.GreaterOrEqual(t, h.counter(t, "otelcol_aeprelay_reconnects"), int64(1))
			requireNoViolations(t, relay)
		})
	}
}

func TestSocketWaitsForTheConnection(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	relay.SetDown(true)
	cfg := socketConfig(relay)
	cfg.Timeout = 300 * time.Millisecond
	h := startExporter(t, cfg, nil)

	err := h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0)))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err), "a relay that is down must be retryable: %v", err)
	assert.Contains(t, err.Error(), "not connected")
	status, _ := h.host.lastStatus()
	assert.Equal(t, componentstatus.StatusRecoverableError, status)

	relay.SetDown(false)
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))
	assert.Equal(t, []string{"ev-s1-0000"}, relayIDs(relay))
	status, _ = h.host.lastStatus()
	assert.Equal(t, componentstatus.StatusOK, status)
}

// scriptedRelay answers the exporter's hello with reply, then closes.
func scriptedRelay(t *testing.T, reply string) (string, *atomic.Int32) {
	t.Helper()
	var hellos atomic.Int32
	upgrader := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ws, err := upgrader.Upgrade(w, req, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		deadline := time.Now().Add(testTimeout)
		_ = ws.SetReadDeadline(deadline)
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		hellos.Add(1)
		_ = ws.WriteMessage(websocket.TextMessage, []byte(reply))
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseProtocolError, ""), deadline)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &hellos
}

func TestSocketPermanentRefusals(t *testing.T) {
	tests := []struct {
		name  string
		relay func(t *testing.T) (endpoint, token string)
		want  string
	}{
		{
			name: "version_unsupported",
			relay: func(t *testing.T) (string, string) {
				u, _ := scriptedRelay(t, `{"type":"error","code":"version-unsupported","versions":["1.0"]}`)
				return u, ""
			},
			want: "version-unsupported; it supports [1.0]",
		},
		{
			name: "hello_required",
			relay: func(t *testing.T) (string, string) {
				u, _ := scriptedRelay(t, `{"type":"error","code":"hello-required"}`)
				return u, ""
			},
			want: "hello-required",
		},
		{
			name: "relay_selects_another_version",
			relay: func(t *testing.T) (string, string) {
				u, _ := scriptedRelay(t, `{"type":"hello","versions":["0.2"]}`)
				return u, ""
			},
			want: "selected versions [0.2]",
		},
		{
			name: "upgrade_required",
			relay: func(t *testing.T) (string, string) {
				srv, _ := statusRelay(t, http.StatusUpgradeRequired, `{"versions":["1.0"]}`)
				return srv.URL, ""
			},
			want: "does not speak AEP 0.1 (HTTP 426)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			endpoint, token := tt.relay(t)
			cfg := testConfig(endpoint)
			cfg.Token = configopaque.String(token)
			h := startExporter(t, cfg, nil)

			ld := aeptest.LogsOf(t, newEvent("s1", 0))
			for range 2 { // the second push finds the exporter already refused
				err := h.consume(t, ld)
				require.Error(t, err)
				assert.True(t, consumererror.IsPermanent(err), "want a permanent error, got %v", err)
				assert.Contains(t, err.Error(), tt.want)
			}
			status, statusErr := h.host.lastStatus()
			assert.Equal(t, componentstatus.StatusPermanentError, status)
			require.Error(t, statusErr)
			assert.Contains(t, statusErr.Error(), tt.want)
		})
	}
}

func TestSocketAnswersRelayPings(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{PingInterval: 50 * time.Millisecond, PongTimeout: testTimeout})
	startExporter(t, socketConfig(relay), nil)
	awaitConnected(t, relay)

	relay.Await(t, "the exporter's pongs", func(r *aeprelaytest.Relay) bool { return countFrames(r, "pong") >= 3 })
	for _, f := range relay.Frames() {
		if f.Type != "pong" {
			continue
		}
		var pong struct {
			T json.Number `json:"t"`
		}
		require.NoError(t, json.Unmarshal(f.Raw, &pong))
		_, err := pong.T.Int64()
		assert.NoError(t, err, "a pong echoes the relay's t: %s", f.Raw)
	}
}

func commandEvent(id, typ, session string) []byte {
	return fmt.Appendf(nil, `{"aep":"0.1","id":%q,"type":%q,"time":"2026-07-12T08:16:00Z","source":"aep://ops/agent/mission-control","agent":"mission-control","session":%q,"capture":"metadata"}`,
		id, typ, session)
}

// startWithControl starts the exporter on relay, with a control
// extension that accepts accepts.
func startWithControl(t *testing.T, relay *aeprelaytest.Relay, accepts ...string) (*harness, *fakeControl) {
	t.Helper()
	controlID := component.MustNewID("openhandscontrol")
	control := newFakeControl(accepts...)
	host := newTestHost()
	host.extensions[controlID] = control
	cfg := socketConfig(relay)
	cfg.Control = &controlID
	return startExporter(t, cfg, host), control
}

func TestSocketHandsCommandsToTheControlExtension(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h, control := startWithControl(t, relay, "control.pause")
	// A session-scoped event on the socket claims the session.
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))

	cmd := commandEvent("cmd-1", "control.pause", "s1")
	refusal, err := relay.SendCommand(cmd)
	require.NoError(t, err)
	require.Nil(t, refusal, "the relay must route the command to the claimant")

	select {
	case got := <-control.commands:
		assert.Equal(t, string(cmd), string(got.raw), "the command arrives byte-identical")
		assert.Equal(t, "control.pause", got.ev.Type)
		assert.Equal(t, "cmd-1", got.ev.ID)
		assert.True(t, got.authenticated, "the link sends the relay's token")
	case <-time.After(testTimeout):
		t.Fatal("the control extension never received the command")
	}
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_commands_received", attribute.String("outcome", "handled")))

	refusal, err = relay.SendCommand(commandEvent("cmd-2", "control.cancel", "s1"))
	require.NoError(t, err)
	require.NotNil(t, refusal)
	assert.Equal(t, "unsupported", refusal.Code, "types outside accepts are refused on our behalf")
}

// TestSocketWithoutCredentialsDeclaresNoCommands: a link that sends no
// credential, or only an empty one (an unset variable in the endpoint's
// query, a header or the token), is not authenticated: the hello declares
// no commands and one that a tokenless, hostile relay injects anyway
// arrives marked unauthenticated, which the gate never executes.
func TestSocketWithoutCredentialsDeclaresNoCommands(t *testing.T) {
	for _, tc := range []struct {
		name   string
		query  string
		mutate func(*Config)
	}{
		{"none", "", func(*Config) {}},
		{"empty access_token", "?access_token=", func(*Config) {}},
		{"blank access_token", "?access_token=%20", func(*Config) {}},
		{"empty Authorization header", "", func(c *Config) {
			c.Headers = configopaque.MapList{{Name: "Authorization", Value: ""}}
		}},
		{"Authorization header without a credential", "", func(c *Config) {
			c.Headers = configopaque.MapList{{Name: "authorization", Value: "Bearer "}}
		}},
		{"blank token", "", func(c *Config) { c.Token = " " }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			relay := aeprelaytest.Start(t, aeprelaytest.Config{}) // a tokenless relay lets anyone speak
			controlID := component.MustNewID("openhandscontrol")
			control := newFakeControl("control.pause")
			host := newTestHost()
			host.extensions[controlID] = control
			cfg := testConfig(relay.URL() + tc.query)
			tc.mutate(cfg)
			cfg.Control = &controlID
			startExporter(t, cfg, host)
			conn := awaitConnected(t, relay)

			hellos := relay.Hellos()
			require.Len(t, hellos, 1)
			assert.Equal(t, []string{}, hellos[0].Accepts, "an open gate behind a link without credentials declares accepts: []")
			assert.Contains(t, string(hellos[0].Raw), `"accepts":[]`)

			// Whoever routes a command anyway: it arrives marked unauthenticated.
			require.NoError(t, relay.SendFrame(conn.ID, commandEvent("cmd-1", "control.pause", "s1")))
			select {
			case got := <-control.commands:
				assert.Equal(t, "cmd-1", got.ev.ID)
				assert.False(t, got.authenticated)
			case <-time.After(testTimeout):
				t.Fatal("the control extension never received the command")
			}
		})
	}
}

func TestSocketWarnsWhenCommandsCannotReachIt(t *testing.T) {
	const warning = "control: the gate is open but this exporter sends the relay no credentials; " +
		"the hello declares accepts: [] and every command is rejected unsupported (set token or auth)"
	controlID := component.MustNewID("openhandscontrol")
	for _, tc := range []struct {
		name     string
		accepts  []string
		token    configopaque.String
		header   bool
		query    bool
		wantWarn bool
	}{
		{"open gate, no credentials", []string{"control.pause"}, "", false, false, true},
		{"open gate, a token", []string{"control.pause"}, relayToken, false, false, false},
		{"open gate, an Authorization header", []string{"control.pause"}, "", true, false, false},
		{"open gate, an access_token", []string{"control.pause"}, "", false, true, false},
		{"closed gate", nil, "", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			relay := startRelay(t, aeprelaytest.Config{})
			host := newTestHost()
			host.extensions[controlID] = newFakeControl(tc.accepts...)
			cfg := testConfig(relay.URL())
			if tc.query {
				cfg = testConfig(relay.URL() + "?access_token=" + relayToken)
			}
			cfg.Token = tc.token
			if tc.header {
				cfg.Headers = configopaque.MapList{{Name: "authorization", Value: "Bearer " + relayToken}}
			}
			cfg.Control = &controlID
			h := startExporter(t, cfg, host)
			assert.Equal(t, tc.wantWarn, len(h.logged(warning)) == 1)
		})
	}
}

func TestSocketWithoutControlLogsAndCountsCommands(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startExporter(t, socketConfig(relay), nil)
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))
	conn := awaitConnected(t, relay)

	refusal, err := relay.SendCommand(commandEvent("cmd-1", "control.pause", "s1"))
	require.NoError(t, err)
	require.NotNil(t, refusal)
	assert.Equal(t, "unsupported", refusal.Code, "accepts: [] makes the relay refuse every command")

	// A relay that routes one anyway: logged and counted, never acted on.
	require.NoError(t, relay.SendFrame(conn.ID, commandEvent("cmd-2", "x.openhands.control.reset", "s1")))
	eventually(t, "the unhandled command to be counted", func() bool {
		return h.counter(t, "otelcol_aeprelay_commands_received", attribute.String("outcome", "unhandled")) == 1
	})
	entries := h.logged("received a command but no control extension is configured; the relay refuses commands on our behalf (accepts: [])")
	require.Len(t, entries, 1)
	assert.Equal(t, "cmd-2", entries[0].ContextMap()["id"])
	assert.Equal(t, "x.openhands.control.reset", entries[0].ContextMap()["type"])
}

func TestSocketUnmatchedErrorFrameIsCountedAtDebug(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startExporter(t, socketConfig(relay), nil)
	conn := awaitConnected(t, relay)

	require.NoError(t, relay.SendFrame(conn.ID, []byte(`{"type":"error","cause":"cmd-9","code":"no-route","detail":"agent down"}`)))
	eventually(t, "the error frame to be counted", func() bool {
		return h.counter(t, "otelcol_aeprelay_unmatched_errors", attribute.String("code", "no-route")) == 1
	})
	entries := h.logged("AEP relay sent an error frame whose cause is none of our unconfirmed events")
	require.Len(t, entries, 1)
	assert.Equal(t, "debug", entries[0].Level.String())
	assert.Equal(t, map[string]any{"cause": "cmd-9", "code": "no-route", "detail": "agent down"}, entries[0].ContextMap())
	assert.Zero(t, h.counter(t, "otelcol_aeprelay_events_rejected"))
	assert.Len(t, relay.Hellos(), 1, "an error frame does not end the connection")
}

// refuseSeq is a relay policy, stricter than the schema, that refuses the
// events with sequence number seq and counts how often it did.
func refuseSeq(seq int64, refusals *atomic.Int64) func(*aep.Event) error {
	return func(ev *aep.Event) error {
		if ev.Seq != nil && *ev.Seq == seq {
			refusals.Add(1)
			return errors.New("seq refused by test policy")
		}
		return nil
	}
}

// requireRelayRefusal checks that poison, and only poison, was dropped as
// refused by the relay with code invalid-event, and that the metrics add
// up: sent + rejected = emitted.
func requireRelayRefusal(t *testing.T, h *harness, transport string, poison *aep.Event, emitted int) {
	t.Helper()
	sent := h.counter(t, "otelcol_aeprelay_events_sent", attribute.String("transport", transport))
	rejected := h.counter(t, "otelcol_aeprelay_events_rejected")
	assert.Equal(t, int64(emitted-1), sent)
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_rejected",
		attribute.String("reason", reasonRelayRefused), attribute.String("code", "invalid-event")))
	assert.Equal(t, int64(emitted), sent+rejected, "sent + rejected = emitted")
	entries := h.logged("the AEP relay refused an event; dropping it, never resending it")
	require.Len(t, entries, 1)
	assert.Equal(t, "warn", entries[0].Level.String())
	assert.Equal(t, map[string]any{
		"id": poison.ID, "type": poison.Type, "session": poison.Session,
		"code": "invalid-event", "detail": "seq refused by test policy",
	}, entries[0].ContextMap())
}

func TestSocketRelayRefusalIsACountedRejection(t *testing.T) {
	var refusals atomic.Int64
	relay := startRelay(t, aeprelaytest.Config{Refuse: refuseSeq(4, &refusals)})
	h := startExporter(t, socketConfig(relay), nil)
	events := sessionEvents("s1", 10)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))

	poison := events[4]
	assert.Equal(t, ids(slices.Delete(slices.Clone(events), 4, 5)), relayIDs(relay), "the other nine are confirmed")
	assert.Equal(t, int64(1), refusals.Load())
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_batches_confirmed"))
	requireRelayRefusal(t, h, "websocket", poison, len(events))
	assert.Len(t, relay.Hellos(), 1, "a refusal does not end the connection")
}

// TestSocketSettlesEveryChunkOfAPush pushes more events than one chunk
// (writeChunk): they arrive in record order, under one ping, and a refusal
// in any chunk is settled like one in the first.
func TestSocketSettlesEveryChunkOfAPush(t *testing.T) {
	n := 3*writeChunk + 5
	for _, refused := range []int{0, 2*writeChunk + 1, n - 1} {
		t.Run(fmt.Sprintf("refused %d of %d", refused, n), func(t *testing.T) {
			var refusals atomic.Int64
			relay := startRelay(t, aeprelaytest.Config{Refuse: refuseSeq(int64(refused), &refusals)})
			h := startExporter(t, socketConfig(relay), nil)
			events := sessionEvents("s1", n)

			require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))

			assert.Equal(t, ids(slices.Delete(slices.Clone(events), refused, refused+1)), relayIDs(relay))
			assert.Equal(t, int64(1), refusals.Load())
			assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_batches_confirmed"), "one push, one ping")
			requireRelayRefusal(t, h, "websocket", events[refused], n)
		})
	}
}

func TestSocketRefusedEventIsNotResentWithTheRest(t *testing.T) {
	var refusals atomic.Int64
	relay := startRelay(t, aeprelaytest.Config{Refuse: refuseSeq(4, &refusals)})
	cfg := withRetry(socketConfig(relay))
	cfg.ConfirmTimeout = 300 * time.Millisecond
	h := startExporter(t, cfg, nil)
	awaitConnected(t, relay)
	relay.SetPong(aeprelaytest.PongMode{Never: true})
	events := sessionEvents("s1", 10)

	redialled := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		err := relay.WaitFor(ctx, func(r *aeprelaytest.Relay) bool { return len(r.Hellos()) == 2 })
		relay.SetPong(aeprelaytest.PongMode{})
		redialled <- err
	}()
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))
	require.NoError(t, <-redialled)

	assert.Equal(t, ids(slices.Delete(slices.Clone(events), 4, 5)), relayIDs(relay))
	assert.Equal(t, int64(1), refusals.Load(), "the refused event is never resent")
	assert.Equal(t, 18, relay.Received(), "the unconfirmed nine were resent")
	requireRelayRefusal(t, h, "websocket", events[4], len(events))
}

func TestSocketRedialsWhenTheRelayCloses(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startExporter(t, socketConfig(relay), nil)
	awaitConnected(t, relay)

	require.NoError(t, relay.Restart(aeprelaytest.KeepState)) // closing frame, then close 1001
	relay.Await(t, "a second hello", func(r *aeprelaytest.Relay) bool { return len(r.Hellos()) == 2 })
	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))
	assert.Equal(t, []string{"ev-s1-0000"}, relayIDs(relay))
}

func TestSocketAuthExtension(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	authID := component.MustNewID("bearertokenauth")
	host := newTestHost()
	host.extensions[authID] = fakeAuth{token: relayToken}
	cfg := testConfig(relay.URL())
	cfg.Auth = configoptional.Some(configauth.Config{AuthenticatorID: authID})
	h := startExporter(t, cfg, host)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))
	assert.Equal(t, []string{"ev-s1-0000"}, relayIDs(relay))
}

func TestSocketStartFailsWithoutTheControlExtension(t *testing.T) {
	controlID := component.MustNewID("openhandscontrol")
	tests := []struct {
		name      string
		extension component.Component
		want      string
	}{
		{"missing", nil, `control: extension "openhandscontrol" is not configured`},
		{"not_a_control_handler", fakeAuth{}, `control: extension "openhandscontrol" does not accept AEP commands`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("http://127.0.0.1:1")
			cfg.Control = &controlID
			host := newTestHost()
			if tt.extension != nil {
				host.extensions[controlID] = tt.extension
			}
			h := newHarness(t, cfg)
			err := h.exp.Start(context.Background(), host)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			require.NoError(t, h.exp.Shutdown(context.Background()))
		})
	}
}

func TestSocketURL(t *testing.T) {
	tests := []struct {
		endpoint, dial, upgrade, display string
	}{
		{"http://relay:8787", "ws://relay:8787/socket", "http://relay:8787/socket", "ws://relay:8787/socket"},
		{"https://relay.example.com/aep/", "wss://relay.example.com/aep/socket", "https://relay.example.com/aep/socket", "wss://relay.example.com/aep/socket"},
		{"https://user:pw@relay/?access_token=secret", "wss://user:pw@relay/socket?access_token=secret", "https://user:pw@relay/socket?access_token=secret", "wss://relay/socket"},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			got, err := newSocketEndpoint(tt.endpoint)
			require.NoError(t, err)
			assert.Equal(t, socketEndpoint{dial: tt.dial, upgrade: tt.upgrade, display: tt.display}, got)
			assert.NotContains(t, got.display, "secret")
		})
	}
}

// BenchmarkPushWebSocket measures confirmed delivery over loopback to the
// test relay: batches of 100 events, each confirmed by its pong.
func BenchmarkPushWebSocket(b *testing.B) {
	relay := startRelay(b, aeprelaytest.Config{})
	benchmarkPush(b, socketConfig(relay))
}

// benchmarkPush measures pushes of 100 events with cfg, its relay
// started; the first push, which connects, is outside the timing. B/op
// counts the in-process relay's work too.
func benchmarkPush(b *testing.B, cfg *Config) {
	const batch = 100
	exp, err := NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(componentType), cfg)
	require.NoError(b, err)
	require.NoError(b, exp.Start(context.Background(), newTestHost()))
	b.Cleanup(func() { require.NoError(b, exp.Shutdown(context.Background())) })
	ld := aeptest.LogsOf(b, sessionEvents("bench", batch)...)
	ctx := context.Background()
	require.NoError(b, exp.ConsumeLogs(ctx, ld)) // connect outside the timing

	b.ReportAllocs()
	pushes := 0
	for b.Loop() {
		if err := exp.ConsumeLogs(ctx, ld); err != nil {
			b.Fatal(err)
		}
		pushes++
	}
	b.ReportMetric(float64(pushes*batch)/b.Elapsed().Seconds(), "events/s")
}

func TestErrorsNeverCarryTheToken(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	cfg := testConfig(relay.URL() + "/?access_token=" + relayToken)
	cfg.Token = "wrong-token"
	h := startExporter(t, cfg, nil)
	err := h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0)))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), relayToken)
	assert.NotContains(t, err.Error(), "wrong-token")
	for _, entry := range h.logs.All() {
		assert.False(t, strings.Contains(fmt.Sprint(entry.ContextMap()), relayToken), "log line %q leaks the token", entry.Message)
	}
}

// TestSocketEventOverTheFrameLimitIsDropped: an event whose frame the relay
// would refuse for its size (over the reference relay's 16 MiB
// AEP_MAX_BODY: it closes the socket) is dropped and counted, not written:
// it failed every retry of its push, and held the queue behind it forever.
func TestSocketEventOverTheFrameLimitIsDropped(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startExporter(t, socketConfig(relay), nil)
	big := attentionRequest("s1", 1)
	big.Data["prompt"] = strings.Repeat("a", maxFrame)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0), big, newEvent("s1", 2))))
	assert.Equal(t, []string{"ev-s1-0000", "ev-s1-0002"}, relayIDs(relay))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_rejected", attribute.String("reason", reasonTooLarge)))
	requireNoViolations(t, relay)
}

// TestByAgentAndDropEventsLeaveThePushAsItIs: a chunk of one agent is its
// own group, so dropping from a group copies what it keeps and never
// writes over the push's events.
func TestByAgentAndDropEventsLeaveThePushAsItIs(t *testing.T) {
	ids := func(events []outboundEvent) []string {
		var out []string
		for _, ev := range events {
			out = append(out, ev.agent+"/"+ev.id)
		}
		return out
	}
	ev := func(agent, id string) outboundEvent { return outboundEvent{agent: agent, id: id} }
	tests := []struct {
		name       string
		chunk      []outboundEvent
		drop       string // the id dropped from each group
		wantGroups [][]string
	}{
		{name: "one_agent", chunk: []outboundEvent{ev("a", "1"), ev("a", "2"), ev("a", "3")},
			wantGroups: [][]string{{"a/1", "a/2", "a/3"}}},
		{name: "one_agent_drop", chunk: []outboundEvent{ev("a", "1"), ev("a", "2"), ev("a", "3")}, drop: "2",
			wantGroups: [][]string{{"a/1", "a/3"}}},
		{name: "two_agents", chunk: []outboundEvent{ev("a", "1"), ev("b", "2"), ev("a", "3"), ev("b", "4")}, drop: "4",
			wantGroups: [][]string{{"a/1", "a/3"}, {"b/2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ids(tt.chunk)
			var got [][]string
			var dropped []string
			for _, group := range byAgent(tt.chunk) {
				kept := dropEvents(group, func(ev outboundEvent) bool { return ev.id == tt.drop },
					func(ev outboundEvent) { dropped = append(dropped, ev.id) })
				got = append(got, ids(kept))
			}
			assert.Equal(t, tt.wantGroups, got)
			if tt.drop != "" {
				assert.Equal(t, []string{tt.drop}, dropped)
			}
			assert.Equal(t, before, ids(tt.chunk), "the push's events are as they were")
		})
	}
}
