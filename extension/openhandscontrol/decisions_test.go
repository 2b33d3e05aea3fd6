package openhandscontrol

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/openhandstest"
)

// stored is s as the receiver's storage gives it back: encoded, decoded.
func stored(t *testing.T, s State) State {
	t.Helper()
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	var out State
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// TestARestartedGateAnswersFromTheConversationsMemory: a send_input is
// written and acked, the collector restarts (a new gate, the
// conversation restored from its stored state), and the relay redelivers
// the command: it gets the recorded ack again, and the agent server no
// second write.
func TestARestartedGateAnswersFromTheConversationsMemory(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusIdle)
	h.register()
	input := h.command("c1", typeSendInput)
	input.Data = map[string]any{"text": "hi"}
	h.gate.HandleCommand(context.Background(), nil, input, true)
	h.await(t, "x.openhands.input.sent", "c1")
	ack := h.await(t, "control.accepted", "c1")
	ack.Seq, ack.Epoch = aep.Int64(4), aep.Int64(1) // as the receiver's emitter positioned it

	h.sess.mu.Lock()
	state := stored(t, h.sess.notes.State())
	h.sess.mu.Unlock()
	restarted := newGateHarness(t, gateConfig(true), h.stub, h.conv)
	restarted.sess.notes.Restore(state)
	restarted.register()
	restarted.gate.HandleCommand(context.Background(), nil, input, true)
	require.Eventually(t, func() bool {
		restarted.sess.mu.Lock()
		defer restarted.sess.mu.Unlock()
		return len(restarted.sess.resent) == 1
	}, waitFor, 5*time.Millisecond)
	assert.Equal(t, ack, restarted.sess.resent[0], "the recorded ack, position included")
	assert.Empty(t, restarted.sess.events(), "no new decision")
	assert.Len(t, h.stub.Writes(), 1, "written once")
	assert.Equal(t, int64(1), restarted.counter(t, "otelcol_openhandscontrol_commands", attribute.String("outcome", outcomeReacked)))

	// The gate's memory now holds it too: a further redelivery is re-acked
	// without asking the conversation.
	restarted.gate.HandleCommand(context.Background(), nil, input, true)
	require.Eventually(t, func() bool {
		return restarted.counter(t, "otelcol_openhandscontrol_commands", attribute.String("outcome", outcomeReacked)) == 2
	}, waitFor, 5*time.Millisecond)
	assert.Len(t, h.stub.Writes(), 1)
}

func TestAConversationRemembersItsLastDecisions(t *testing.T) {
	view := &fakeView{status: statusRunning, capture: aep.CaptureMetadata}
	n := NewNotes(view, true)
	for i := range keptDecisions + 3 {
		f := flight(typeResume)
		f.cmd.id = fmt.Sprint("c", i)
		n.reject(f, &rejection{reason: reasonRefused, detail: "running"}, at)
	}
	s := stored(t, n.State())
	require.Len(t, s.Decided, keptDecisions, "bounded")
	assert.Equal(t, "c3", s.Decided[0].ID, "the oldest forgotten first")
	assert.Equal(t, reasonRefused, s.Decided[0].Reason)

	restored := NewNotes(view, true)
	restored.Restore(State{Decided: append(s.Decided, Decision{Source: "aep://ops", ID: "damaged"})})
	_, ok := restored.recorded(commandKey{"aep://ops", "c3"})
	assert.True(t, ok)
	_, ok = restored.recorded(commandKey{"aep://ops", "c2"})
	assert.False(t, ok, "forgotten before the restart")
	_, ok = restored.recorded(commandKey{"aep://ops", "damaged"})
	assert.False(t, ok, "a record without an ack is dropped")
	assert.Equal(t, s, restored.State())

	var none *Notes
	none.Restore(s)
	assert.Zero(t, none.State(), "no gate: nothing kept")
}
