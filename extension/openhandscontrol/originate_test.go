package openhandscontrol

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

func (h *gateHarness) originated(id string) *aep.Event {
	return &aep.Event{AEP: aep.Version, ID: id, Type: typePause, Time: "2026-07-01T10:00:00.000Z",
		Source: "aep://aeppolicy/agent/aeppolicy", Agent: "aeppolicy", Session: h.conv.ID()}
}

// TestAnOriginatedPauseIsAnOperatorsPause: the collector's own pause is
// executed, acked and deduplicated like a relayed one: one write however
// often it is originated.
func TestAnOriginatedPauseIsAnOperatorsPause(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	for range 3 {
		require.NoError(t, h.gate.Originate(context.Background(), h.originated("breach-1")))
	}
	h.await(t, "control.accepted", "breach-1")
	require.Eventually(t, func() bool { return h.conv.Status() == oh.StatusPaused }, waitFor, 5*time.Millisecond)
	assert.Len(t, h.stub.Writes(), 1)
	assert.Equal(t, int64(1), h.counter(t, "otelcol_openhandscontrol_commands",
		attribute.String("type", typePause), attribute.String("outcome", "accepted")))
}

// TestAnOriginatedCommandMeetsTheGuards: a pause of a conversation that
// is not running is refused, as an operator's is, and writes nothing.
func TestAnOriginatedCommandMeetsTheGuards(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusIdle)
	h.register()
	require.NoError(t, h.gate.Originate(context.Background(), h.originated("breach-1")))
	ack := h.await(t, "control.rejected", "breach-1")
	assert.Equal(t, "refused", ack.Data["reason"])
	assert.Empty(t, h.stub.Writes())
}

// TestAClosedGateOriginatesNothing: with the gate off, nothing is written,
// acked or counted.
func TestAClosedGateOriginatesNothing(t *testing.T) {
	h := startGate(t, gateConfig(false), oh.StatusRunning)
	h.register()
	assert.ErrorIs(t, h.gate.Originate(context.Background(), h.originated("breach-1")), ErrGateClosed)
	require.NoError(t, h.gate.Shutdown(context.Background()), "every command worker has ended")
	assert.Empty(t, h.sess.events())
	assert.Empty(t, h.stub.Writes())
}

// TestAnOriginatedCommandForASessionNotObservedHereIsDropped: a session
// this collector observes no conversation of is not addressed.
func TestAnOriginatedCommandForASessionNotObservedHereIsDropped(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	cmd := h.originated("breach-1")
	cmd.Session = "another-replicas-conversation"
	require.NoError(t, h.gate.Originate(context.Background(), cmd))
	require.Eventually(t, func() bool {
		return h.counter(t, "otelcol_openhandscontrol_commands", attribute.String("outcome", "unroutable")) == 1
	}, waitFor, 5*time.Millisecond)
	assert.Empty(t, h.sess.events())
	assert.Empty(t, h.stub.Writes())
}
