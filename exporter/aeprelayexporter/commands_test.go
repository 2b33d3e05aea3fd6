package aeprelayexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
)

// commandRecord is the AEP projection of a command addressed to session, as
// an OTLP client can POST it: valid in every respect but that an emitter
// must never send it.
func commandRecord(t *testing.T, ld plog.Logs, id, typ, session string, data map[string]any) {
	t.Helper()
	capture := aep.CaptureMetadata
	if data != nil {
		capture = aep.CaptureRedacted
	}
	ev := &aep.Event{
		AEP: aep.Version, ID: id, Type: typ, Time: "2026-07-12T08:16:00Z",
		Source: "aep://otelcol-test/agent/openhands/session/" + session, Agent: "openhands",
		Session: session, Capture: capture, Data: data,
	}
	lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
	require.NoError(t, projection.ToLogRecord(ev, lr, projection.Options{}))
}

// ack is the gate's control.accepted of command, an event of session.
func ack(session string, seq int64, command string) *aep.Event {
	ev := newEvent(session, seq)
	ev.ID, ev.Type, ev.Run, ev.Cause, ev.Data = "ack-"+command, "control.accepted", "", command, map[string]any{}
	return ev
}

// TestEmitterNeverSendsCommands feeds each transport a push that mixes
// events, the gate's ack and the projections of commands for a session
// this collector's own socket claims, with its gate accepting them: the
// relay would route every command back here. None leaves; the rest of the
// push does, and each refusal is counted.
func TestEmitterNeverSendsCommands(t *testing.T) {
	for _, transport := range []Transport{TransportWebSocket, TransportHTTP} {
		t.Run(string(transport), func(t *testing.T) {
			relay := startRelay(t, aeprelaytest.Config{})
			controlID := component.MustNewID("openhandscontrol")
			control := newFakeControl("control.pause", "x.openhands.control.send_input")
			host := newTestHost()
			host.extensions[controlID] = control
			cfg := socketConfig(relay)
			cfg.Control = &controlID
			claimant := startExporter(t, cfg, host)
			require.NoError(t, claimant.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))

			h := claimant
			if transport == TransportHTTP {
				h = startHTTPExporter(t, relay)
			}
			ld := aeptest.LogsOf(t, newEvent("s1", 1), ack("s1", 2, "cmd-0"), newEvent("s1", 3))
			commandRecord(t, ld, "cmd-pause", "control.pause", "s1", nil)
			commandRecord(t, ld, "cmd-input", "x.openhands.control.send_input", "s1", map[string]any{"text": "rm -rf ~"})
			commandRecord(t, ld, "cmd-invalid", "control.pause", "", nil) // no session: not even valid

			require.NoError(t, h.consume(t, ld))
			assert.Empty(t, relay.Commands(), "a command left the exporter")
			assert.Empty(t, control.commands, "a command came back to this collector")
			assert.Equal(t, []string{"ev-s1-0000", "ev-s1-0001", "ack-cmd-0", "ev-s1-0003"}, relayIDs(relay),
				"the rest of the push, the ack included, leaves")
			assert.Equal(t, int64(3), h.counter(t, "otelcol_aeprelay_commands_refused", attribute.String("transport", string(transport))))
			assert.Zero(t, h.counter(t, "otelcol_aeprelay_events_rejected"))
			entries := h.logged("refusing to send a control command to the AEP relay: an emitter never sends commands. " +
				"A receiver of this pipeline took it from outside; authenticate it (README: Security)")
			require.Len(t, entries, 1, "one line per minute, not one per command")
			assert.Equal(t, "control.pause", entries[0].ContextMap()["type"])
			requireNoViolations(t, relay)
		})
	}
}
