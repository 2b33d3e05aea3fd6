package openhandscontrol

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// fakeView is one conversation's mapping state as a test scripts it.
type fakeView struct {
	status, attention string
	capture           aep.Capture
}

func (v *fakeView) Status() string    { return v.status }
func (v *fakeView) Attention() string { return v.attention }

func (v *fakeView) NewEvent(typ string, _ time.Time, key string) *aep.Event {
	ev := &aep.Event{Type: typ, ID: typ + "|" + key, Capture: v.capture}
	if v.capture != aep.CaptureNone {
		ev.Data = map[string]any{}
	}
	return ev
}

func (v *fakeView) Redacted(out *aep.Event, s string) (string, bool) {
	switch out.Capture {
	case aep.CaptureRedacted:
		return "R(" + s + ")", true
	case aep.CaptureFull:
		return s, true
	}
	return "", false
}

var at = time.Date(2026, 7, 12, 8, 0, 0, 0, time.UTC)

func flight(typ string) *inflight {
	return &inflight{cmd: &command{id: "cmd-" + typ, source: "aep://ops", agent: "ops", session: "s1", typ: typ}}
}

// mapped is a batch as the mapper emits it for a status flip.
func mapped(types ...string) []*aep.Event {
	var out []*aep.Event
	for _, typ := range types {
		ev := &aep.Event{Type: typ, ID: "m|" + typ, Data: map[string]any{}}
		if typ == "attention.resolved" {
			ev.Subject, ev.Cause = "req-1", "req-1"
		}
		out = append(out, ev)
	}
	return out
}

func types(evs []*aep.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

func TestGuards(t *testing.T) {
	for _, tc := range []struct {
		typ, status, attention, subject string
		want                            string // "" = forwarded
	}{
		{typ: typePause, status: statusRunning},
		{typ: typePause, status: "idle", want: "its status is idle"},
		{typ: typePause, status: "", want: "its status is not observed yet"},
		{typ: typeInterrupt, status: statusRunning},
		{typ: typeInterrupt, status: statusPaused, want: "its status is paused"},
		{typ: typeResume, status: statusPaused},
		{typ: typeResume, status: "idle", want: "only from paused"},
		{typ: typeResume, status: statusWaiting, attention: "req-1", want: "answer the pending request with control.attention.respond"},
		{typ: typeSendInput, status: "finished"},
		{typ: typeSendInput, status: statusWaiting, attention: "req-1"},
		{typ: typeRespond, status: statusWaiting, attention: "req-1", subject: "req-1"},
		{typ: typeRespond, status: statusWaiting, attention: "req-1", subject: "req-0", want: "subject req-0 is not the live pending request req-1"},
		{typ: typeRespond, status: statusRunning, subject: "req-1", want: "no attention request is pending"},
	} {
		t.Run(tc.typ+" "+tc.status+" "+tc.subject, func(t *testing.T) {
			n := newNotes(&fakeView{status: tc.status, attention: tc.attention}, true)
			f := flight(tc.typ)
			f.cmd.subject = tc.subject
			rej := n.guard(f.cmd)
			if tc.want == "" {
				assert.Nil(t, rej)
				return
			}
			require.NotNil(t, rej)
			assert.Equal(t, reasonRefused, rej.reason)
			assert.Contains(t, rej.detail, tc.want)
		})
	}
}

func TestASecondRespondWhileSettlingIsRefused(t *testing.T) {
	n := newNotes(&fakeView{status: statusWaiting, attention: "req-1"}, true)
	first, second := flight(typeRespond), flight(typeRespond)
	first.cmd.subject, second.cmd.subject, second.cmd.id = "req-1", "req-1", "cmd-2"
	require.Nil(t, n.guard(first.cmd))
	n.arm(first)
	rej := n.guard(second.cmd)
	require.NotNil(t, rej)
	assert.Contains(t, rej.detail, "already settling")
}

// TestHoldWaitsForTheFlipAWrittenCommandAsksFor: a written pause or
// interrupt holds back a pause, an interrupt only another interrupt (it
// may escalate a pending pause), a resume only a resume.
func TestHoldWaitsForTheFlipAWrittenCommandAsksFor(t *testing.T) {
	limit := RateLimit{WritesPerSecond: 1, Burst: 10}
	for _, tc := range []struct {
		written, next string
		busy          bool
	}{
		{typePause, typePause, true},
		{typeInterrupt, typePause, true},
		{typeInterrupt, typeInterrupt, true},
		{typePause, typeInterrupt, false},
		{typeResume, typeResume, true},
		{typePause, typeResume, false},
		{typeSendInput, typeSendInput, false},
	} {
		t.Run(tc.written+" then "+tc.next, func(t *testing.T) {
			n := newNotes(&fakeView{status: statusRunning}, true)
			*n.note(tc.written) = flight(tc.written)
			rej := n.hold(flight(tc.next).cmd, limit)
			if !tc.busy {
				assert.Nil(t, rej)
				return
			}
			require.NotNil(t, rej)
			assert.Equal(t, reasonBusy, rej.reason)
			assert.Contains(t, rej.detail, tc.written+" (command cmd-"+tc.written+") was written")
		})
	}
}

func TestDecorateLeavesTheMappingAloneWithoutAGate(t *testing.T) {
	var n *Notes
	out := mapped("state.delta", "attention.requested")
	assert.Equal(t, out, n.Decorate("running", out, at))
	assert.Empty(t, out[1].Data)

	closed := newNotes(&fakeView{status: statusWaiting}, false)
	closed.Decorate(statusRunning, out, at)
	assert.Empty(t, out[1].Data, "a closed gate offers no options")
}

func TestDecorateMakesRequestsAnswerable(t *testing.T) {
	n := newNotes(&fakeView{status: statusWaiting}, true)
	out := n.Decorate(statusRunning, mapped("state.delta", "attention.requested"), at)
	assert.Equal(t, []any{"control"}, out[1].Data["respond_via"])
	assert.Len(t, out[1].Data["options"], 2)
}

func TestDecorateCauseLinksTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		name      string
		armed     []string // command types armed, in order
		acked     bool     // the REST answer decided the ack already
		from, to  string
		batch     []string
		wantTypes []string
		wantCause map[string]string // type → cause
	}{
		{name: "pause lands", armed: []string{typePause}, from: statusRunning, to: statusPaused,
			batch: []string{"state.delta"}, wantTypes: []string{"control.accepted", "state.delta"},
			wantCause: map[string]string{"state.delta": "cmd-control.pause", "control.accepted": "cmd-control.pause"}},
		{name: "pause lands after its ack", armed: []string{typePause}, acked: true, from: statusRunning, to: statusPaused,
			batch: []string{"state.delta"}, wantTypes: []string{"state.delta"},
			wantCause: map[string]string{"state.delta": "cmd-control.pause"}},
		{name: "the interrupt made it instant", armed: []string{typePause, typeInterrupt}, acked: true, from: statusRunning, to: statusPaused,
			batch: []string{"state.snapshot"}, wantTypes: []string{"state.snapshot"},
			wantCause: map[string]string{"state.snapshot": "cmd-x.openhands.control.interrupt"}},
		{name: "resume lands", armed: []string{typeResume}, acked: true, from: statusPaused, to: statusRunning,
			batch: []string{"state.delta"}, wantTypes: []string{"state.delta"},
			wantCause: map[string]string{"state.delta": "cmd-control.resume"}},
		{name: "another flip clears the pause", armed: []string{typePause}, acked: true, from: statusRunning, to: statusWaiting,
			batch: []string{"state.delta", "attention.requested"}, wantTypes: []string{"state.delta", "attention.requested"},
			wantCause: map[string]string{"state.delta": ""}},
		{name: "the approval lands", armed: []string{typeRespond}, from: statusWaiting, to: statusRunning,
			batch:     []string{"state.delta", "attention.resolved"},
			wantTypes: []string{"control.accepted", "state.delta", "attention.answered", "attention.resolved"},
			wantCause: map[string]string{"attention.answered": "cmd-control.attention.respond", "attention.resolved": "cmd-control.attention.respond", "state.delta": ""}},
		{name: "a dismissal is not an answer", armed: []string{typeRespond}, acked: true, from: statusWaiting, to: statusPaused,
			batch: []string{"state.delta", "attention.resolved"}, wantTypes: []string{"state.delta", "attention.resolved"},
			wantCause: map[string]string{"attention.resolved": "req-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := &fakeView{status: tc.from, attention: "req-1", capture: aep.CaptureRedacted}
			n := newNotes(view, true)
			for _, typ := range tc.armed {
				f := flight(typ)
				f.cmd.subject, f.cmd.option, f.cmd.text = "req-1", optionApprove, "fine"
				n.arm(f)
				if tc.acked {
					n.accept(f, at)
				}
			}
			view.status = tc.to
			out := n.Decorate(tc.from, mapped(tc.batch...), at)
			assert.Equal(t, tc.wantTypes, types(out))
			for _, ev := range out {
				if want, ok := tc.wantCause[ev.Type]; ok {
					assert.Equal(t, want, ev.Cause, ev.Type)
				}
				if ev.Type == "attention.answered" {
					assert.Equal(t, "req-1", ev.Subject)
					assert.Equal(t, map[string]any{"option": "approve", "text": "R(fine)"}, ev.Data["answer"])
					assert.Equal(t, "control", ev.Data["via"])
					assert.Equal(t, "ops", ev.Data["by"])
				}
			}
			assert.Nil(t, n.pause)
			assert.Nil(t, n.resume)
			assert.Nil(t, n.interrupt)
			assert.Nil(t, n.respond, "any status change clears every note")
		})
	}
}

func TestSettle(t *testing.T) {
	refused := &rejection{reason: reasonRefused, detail: "409 Conflict"}
	t.Run("a failed write nacks and drops the note", func(t *testing.T) {
		n := newNotes(&fakeView{status: statusRunning, capture: aep.CaptureRedacted}, true)
		f := flight(typePause)
		n.arm(f)
		out := n.settle(f, result{rejection: refused}, at)
		require.Equal(t, []string{"control.rejected"}, types(out))
		assert.Equal(t, map[string]any{"reason": "refused", "detail": "R(409 Conflict)"}, out[0].Data)
		assert.Equal(t, "cmd-control.pause", out[0].Cause)
		assert.Nil(t, n.pause)
	})
	t.Run("at metadata the detail stays home", func(t *testing.T) {
		n := newNotes(&fakeView{capture: aep.CaptureMetadata}, true)
		out := n.settle(flight(typePause), result{rejection: refused}, at)
		assert.Equal(t, map[string]any{"reason": "refused"}, out[0].Data)
	})
	t.Run("will-try, then the write fails: one ack, the note dropped", func(t *testing.T) {
		n := newNotes(&fakeView{status: statusRunning}, true)
		f := flight(typePause)
		n.arm(f)
		assert.Equal(t, []string{"control.accepted"}, types(n.settle(f, result{willTry: true}, at)))
		assert.Same(t, f, n.pause, "the flip may still come")
		assert.Empty(t, n.settle(f, result{rejection: refused}, at))
		assert.Nil(t, n.pause)
		assert.Equal(t, "control.accepted", f.decision.ack.Type)
	})
	t.Run("send_input: the outcome at 2xx, once, never echoing the text", func(t *testing.T) {
		n := newNotes(&fakeView{status: "idle", capture: aep.CaptureFull}, true)
		f := flight(typeSendInput)
		f.cmd.input = "do not echo me"
		assert.Equal(t, []string{"control.accepted"}, types(n.settle(f, result{willTry: true}, at)))
		out := n.settle(f, result{written: true}, at)
		require.Equal(t, []string{"x.openhands.input.sent"}, types(out))
		assert.Equal(t, "cmd-x.openhands.control.send_input", out[0].Cause)
		assert.Empty(t, out[0].Data)
		assert.Empty(t, n.settle(f, result{written: true}, at))
	})
	t.Run("accepted carries no data", func(t *testing.T) {
		n := newNotes(&fakeView{status: statusRunning}, true)
		out := n.settle(flight(typeInterrupt), result{written: true}, at)
		assert.Nil(t, out[0].Data)
	})
}

func TestTheAnswerTextRidesOnlyAboveMetadata(t *testing.T) {
	for _, tc := range []struct {
		capture aep.Capture
		want    map[string]any
	}{
		{aep.CaptureMetadata, map[string]any{"option": "deny"}},
		{aep.CaptureRedacted, map[string]any{"option": "deny", "text": "R(not here)"}},
		{aep.CaptureFull, map[string]any{"option": "deny", "text": "not here"}},
	} {
		t.Run(string(tc.capture), func(t *testing.T) {
			view := &fakeView{status: statusWaiting, attention: "req-1", capture: tc.capture}
			n := newNotes(view, true)
			f := flight(typeRespond)
			f.cmd.subject, f.cmd.option, f.cmd.text = "req-1", optionDeny, "not here"
			n.arm(f)
			view.status = "idle"
			out := n.Decorate(statusWaiting, mapped("state.delta", "attention.resolved"), at)
			i := slices.IndexFunc(out, func(ev *aep.Event) bool { return ev.Type == "attention.answered" })
			require.GreaterOrEqual(t, i, 0)
			assert.Equal(t, tc.want, out[i].Data["answer"])
		})
	}
}
