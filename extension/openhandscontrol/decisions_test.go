package openhandscontrol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
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
	restarted.sess.notes.restore(state)
	restarted.register()
	restarted.gate.HandleCommand(context.Background(), nil, input, true)
	assert.Equal(t, ack, restarted.sess.awaitResent(t, 1)[0], "the recorded ack, position included")
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
	n := newNotes(view, true)
	for i := range keptDecisions + 3 {
		f := flight(typeResume)
		f.cmd.id = fmt.Sprint("c", i)
		n.reject(f, &rejection{reason: reasonRefused, detail: "running"}, at)
	}
	s := stored(t, n.State())
	require.Len(t, s.Decided, keptDecisions, "bounded")
	assert.Equal(t, "c3", s.Decided[0].ID, "the oldest forgotten first")
	assert.Equal(t, reasonRefused, s.Decided[0].Reason)

	restored := newNotes(view, true)
	restored.restore(State{Decided: append(s.Decided, Decision{Source: "aep://ops", ID: "damaged"})})
	_, ok := restored.recorded(commandKey{"aep://ops", "c3"})
	assert.True(t, ok)
	_, ok = restored.recorded(commandKey{"aep://ops", "c2"})
	assert.False(t, ok, "forgotten before the restart")
	_, ok = restored.recorded(commandKey{"aep://ops", "damaged"})
	assert.False(t, ok, "a record without an ack is dropped")
	assert.Equal(t, s, restored.State())

	overfull := newNotes(view, true)
	overfull.restore(State{Decided: append([]Decision{{Source: "aep://ops", ID: "older", Ack: s.Decided[0].Ack}}, s.Decided...)})
	assert.Equal(t, s, overfull.State(), "a stored state over the bound loses its oldest")

	var none *Notes
	assert.Zero(t, none.State(), "no gate: nothing kept")
}

func TestANoteIsSavedBeforeItsWrite(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	h.await(t, "control.accepted", "c1")
	h.sess.mu.Lock()
	defer h.sess.mu.Unlock()
	require.Len(t, h.sess.saved, 1)
	assert.Equal(t, []Pending{{Source: "aep://ops", ID: "c1", Type: typePause, Agent: "ops"}}, h.sess.saved[0].Pending,
		"stored undecided, before the write")
	assert.Empty(t, h.sess.notes.State().Pending, "decided since")
}

func TestANoteStorageRefusesIsNotWritten(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	h.sess.saveErr = errors.New("disk full")
	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	ack := h.await(t, "control.rejected", "c1")
	assert.Equal(t, reasonBusy, ack.Data["reason"])
	assert.Contains(t, ack.Data["detail"], "could not record the command before its write")
	assert.NotContains(t, ack.Data["detail"], "disk full", "the storage's error stays in the local log")
	assert.Empty(t, h.stub.Writes())
	h.sess.mu.Lock()
	defer h.sess.mu.Unlock()
	assert.Nil(t, h.sess.notes.writing, "no write in flight")
	assert.Nil(t, h.sess.notes.pause, "no note left")
}

// TestARestoredNoteIsDecidedByWhatTheStreamShows: a command written, or
// about to be, when the collector stopped comes back as a note; the
// stream showing its outcome acks it control.accepted.
func TestARestoredNoteIsDecidedByWhatTheStreamShows(t *testing.T) {
	view := &fakeView{status: statusRunning, capture: aep.CaptureMetadata}
	before := newNotes(view, true)
	pause, input := flight(typePause), flight(typeSendInput)
	input.cmd.input, input.cmd.digest = "hi", digest("hi")
	before.arm(pause)
	before.input = input
	n := newNotes(view, true)
	n.restore(stored(t, before.State()))
	require.Len(t, n.State().Pending, 2)

	out := n.Said("something else", mapped("x.openhands.message.event"), at)
	assert.Equal(t, []string{"x.openhands.message.event"}, types(out), "another text is another message")
	out = n.Said("hi", mapped("x.openhands.message.event"), at)
	assert.Equal(t, []string{"control.accepted", "x.openhands.input.sent", "x.openhands.message.event"}, types(out))
	assert.Equal(t, input.cmd.id, out[1].Cause)

	view.status = statusPaused
	out = n.Decorate(statusRunning, mapped("state.delta"), at)
	assert.Equal(t, []string{"control.accepted", "state.delta"}, types(out))
	assert.Equal(t, pause.cmd.id, out[0].Cause)
	assert.Equal(t, pause.cmd.id, out[1].Cause)
	s := n.State()
	assert.Empty(t, s.Pending)
	assert.Len(t, s.Decided, 2)
}

// restore gives the harness's conversation the notes a restart restores.
func (h *gateHarness) restore(pending ...Pending) {
	h.sess.mu.Lock()
	defer h.sess.mu.Unlock()
	h.sess.notes.restore(State{Pending: pending})
}

// TestARedeliveryOfARestoredCommand: the relay redelivers a command whose
// note a restart restored. Shown by the stream while it waits, it is
// answered by that ack; not shown within half of reply_guard, it is
// judged afresh.
func TestARedeliveryOfARestoredCommand(t *testing.T) {
	cfg := gateConfig(true)
	cfg.ReplyGuard = 4 * time.Second
	h := startGate(t, cfg, oh.StatusRunning)
	h.register()
	h.restore(
		Pending{Source: "aep://ops", ID: "c1", Type: typePause, Agent: "ops"},
		Pending{Source: "aep://ops", ID: "c2", Type: typeSendInput, Agent: "ops", Digest: digest("hi")},
	)

	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	require.Eventually(t, func() bool {
		h.sess.mu.Lock()
		defer h.sess.mu.Unlock()
		return h.sess.notes.pause.decided != nil
	}, waitFor, 5*time.Millisecond, "the redelivery does not wait for the stream")
	h.sess.mu.Lock()
	h.sess.view.status = statusPaused // the stream shows the flip
	h.sess.emitted = append(h.sess.emitted, h.sess.notes.Decorate(statusRunning, mapped("state.delta"), at)...)
	h.sess.mu.Unlock()
	h.await(t, "control.accepted", "c1")
	require.Eventually(t, func() bool {
		return h.counter(t, "otelcol_openhandscontrol_commands", attribute.String("outcome", outcomeDuplicate)) == 1
	}, waitFor, 5*time.Millisecond)

	input := h.command("c2", typeSendInput)
	input.Data = map[string]any{"text": "hi"}
	h.gate.HandleCommand(context.Background(), nil, input, true)
	h.await(t, "x.openhands.input.sent", "c2")
	writes := h.stub.Writes()
	require.Len(t, writes, 1, "the pause was not written again; the input, not shown, was judged afresh")
	assert.True(t, strings.HasSuffix(writes[0].Path, "/events"))
	acks := 0
	for _, ev := range h.sess.events() {
		if strings.HasPrefix(ev.Type, "control.") {
			acks++
		}
	}
	assert.Equal(t, 2, acks, "one ack per command")
}

// TestARestoredNoteNotShownInTimeIsDropped: a redelivered command whose
// restored note the stream does not decide within half of reply_guard is
// judged afresh; refused then, it leaves no note behind, so a flip the
// stream shows later gives it no second ack.
func TestARestoredNoteNotShownInTimeIsDropped(t *testing.T) {
	cfg := gateConfig(true)
	cfg.ReplyGuard = 2 * time.Second
	cfg.ConversationRateLimit = RateLimit{WritesPerSecond: 0.001, Burst: 1}
	h := startGate(t, cfg, oh.StatusRunning)
	h.register()
	input := h.command("c0", typeSendInput)
	input.Data = map[string]any{"text": "hi"}
	h.gate.HandleCommand(context.Background(), nil, input, true)
	h.await(t, "x.openhands.input.sent", "c0") // the one write the limit allows
	h.restore(Pending{Source: "aep://ops", ID: "c1", Type: typePause, Agent: "ops"})

	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), true)
	assert.Equal(t, reasonBusy, h.await(t, "control.rejected", "c1").Data["reason"])
	h.sess.mu.Lock()
	h.sess.view.status = statusPaused // the stream shows the flip after all
	h.sess.emitted = append(h.sess.emitted, h.sess.notes.Decorate(statusRunning, mapped("state.delta"), at)...)
	h.sess.mu.Unlock()
	acks := 0
	for _, ev := range h.sess.events() {
		if strings.HasPrefix(ev.Type, "control.") && ev.Cause == "c1" {
			acks++
		}
	}
	assert.Equal(t, 1, acks, "one ack per command")
}

// TestARestoredNoteHoldsNothingBack: a restored note's write may never
// have landed; another command of its verb is judged as if it were not
// there, and a command over a link without credentials never touches it.
func TestARestoredNoteHoldsNothingBack(t *testing.T) {
	h := startGate(t, gateConfig(true), oh.StatusRunning)
	h.register()
	h.restore(Pending{Source: "aep://ops", ID: "c1", Type: typePause, Agent: "ops"})

	h.gate.HandleCommand(context.Background(), nil, h.command("c1", typePause), false)
	assert.Equal(t, reasonUnsupported, h.await(t, "control.rejected", "c1").Data["reason"])
	h.sess.mu.Lock()
	assert.NotNil(t, h.sess.notes.restoredNote(commandKey{"aep://ops", "c1"}), "still the stream's to decide")
	h.sess.mu.Unlock()

	h.gate.HandleCommand(context.Background(), nil, h.command("c2", typePause), true)
	h.await(t, "control.accepted", "c2")
	assert.Len(t, h.stub.Writes(), 1)
}
