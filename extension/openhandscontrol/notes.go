package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The agent server's execution statuses the guards and outcomes name.
const (
	statusRunning  = "running"
	statusPaused   = "paused"
	statusWaiting  = "waiting_for_confirmation"
	statusDeleting = "deleting"
)

// inflight is one command from its guard check to its settlement. The
// worker executing it and the conversation's Notes share it, under the
// conversation's lock only.
type inflight struct {
	cmd *command
	// decision is the recorded ack, unmade until the REST result, the
	// reply guard's expiry or the observed outcome itself decides it,
	// whichever comes first.
	decision decision
	// restored marks a note a restart brought back (restore): its
	// write was made, or about to be, by the process before.
	restored bool
	// inputSent marks the send_input outcome as emitted.
	inputSent bool
	// decided, when set, learns the decision the moment it is made (under
	// the conversation's lock, before the ack is emitted), so that a
	// redelivery arriving after the ack always finds it recorded.
	decided func(decision)
	// answered is closed once the command's write has its answer (or
	// failed); commands waiting on the conversation's write wait on it.
	answered chan struct{}
}

// decision is a command's ack: the event and, for control.rejected, its
// reason (which the event carries only when its capture level has data).
type decision struct {
	ack    *aep.Event
	reason string
}

// Notes is one conversation's control state: the commands whose outcome
// the stream has yet to show, and the last ones decided. The receiver
// holds one per conversation and uses it under the conversation's lock
// only: in Control, in Decorate on every mapped batch, in Said on every
// user message, and to take and restore its State. A nil *Notes decorates
// nothing (no gate).
type Notes struct {
	view       View
	answerable bool
	// The pending notes of the design record: the command whose status
	// flip the stream has yet to show, per verb. Any status change clears
	// them.
	pause, resume, interrupt *inflight
	// respond marks the live attention request settling.
	respond *inflight
	// input is the send_input whose message the stream has yet to show
	// (Said); a status change leaves it.
	input *inflight
	// writing is the command whose REST write has not answered yet: at
	// most one write is in flight per conversation.
	writing *inflight
	// writes is the conversation's rate limit, made on its first write.
	writes *rate.Limiter
	// decided are the conversation's most recent decided commands, oldest
	// first (decisions.go): what its State carries across a restart.
	decided []Decision
}

// newNotes returns the control state of one conversation read through
// view; answerable (the gate is on) makes its attention requests carry
// the approve/deny options and the control respond path.
func newNotes(view View, answerable bool) *Notes {
	return &Notes{view: view, answerable: answerable}
}

// guard checks a command against the last-observed status and attention
// request, before any write: nil means forward it.
func (n *Notes) guard(c *command) *rejection {
	status := n.view.Status()
	shown := status
	if shown == "" {
		shown = "not observed yet"
	}
	refused := func(format string, args ...any) *rejection {
		return &rejection{reason: reasonRefused, detail: fmt.Sprintf(format, args...)}
	}
	switch c.typ {
	case typePause, typeInterrupt:
		if status != statusRunning {
			return refused("%s is forwarded only while the conversation is running; its status is %s", c.typ, shown)
		}
	case typeResume:
		switch status {
		case statusPaused:
		case statusWaiting:
			return refused("the conversation is waiting for confirmation: answer the pending request with %s (a resume there would approve it)", typeRespond)
		default:
			return refused("%s is forwarded only from paused; the conversation's status is %s", typeResume, shown)
		}
	case typeRespond:
		live := n.view.Attention()
		switch {
		case live == "":
			return refused("no attention request is pending (status %s)", shown)
		case c.subject != live:
			return refused("subject %s is not the live pending request %s", c.subject, live)
		case written(n.respond) != nil:
			return refused("a respond to %s (command %s) is already settling", live, n.respond.cmd.id)
		}
	}
	return nil
}

// hold checks a command the guards let through, with no write in flight,
// against the writes already made: it is refused busy while an earlier
// command asking for the same flip waits for the stream to show it (the
// guard it passed read a status that write is about to change), or past
// the conversation's rate limit. nil means forward it; the write is then
// counted against the limit.
func (n *Notes) hold(c *command, limit RateLimit) *rejection {
	busy := func(format string, args ...any) *rejection {
		return &rejection{reason: reasonBusy, detail: fmt.Sprintf(format, args...)}
	}
	var pending *inflight
	switch c.typ {
	case typePause:
		pending = cmp.Or(written(n.pause), written(n.interrupt))
	case typeInterrupt:
		pending = written(n.interrupt) // an interrupt may escalate a pending pause
	case typeResume:
		pending = written(n.resume)
	}
	if pending != nil {
		return busy("%s (command %s) was written and its status change is not observed yet", pending.cmd.typ, pending.cmd.id)
	}
	if n.writes == nil {
		n.writes = rate.NewLimiter(rate.Limit(limit.WritesPerSecond), limit.Burst)
	}
	if !n.writes.Allow() {
		return busy("this conversation's write rate limit is reached (%g writes per second, burst %d)", limit.WritesPerSecond, limit.Burst)
	}
	return nil
}

// written is note f if this process wrote its command: a restored note
// (its write may never have landed) holds no other command back, or one
// lost write would refuse its verb until the status changes.
func written(f *inflight) *inflight {
	if f == nil || f.restored {
		return nil
	}
	return f
}

// arm records a forwarded command's pending note, so that the status
// flip it causes is cause-linked to it, and its write as the one in
// flight.
func (n *Notes) arm(f *inflight) {
	n.writing, f.answered = f, make(chan struct{})
	if note := n.note(f.cmd.typ); note != nil {
		*note = f
	}
}

// note is where the pending note of a command of type typ is kept; nil
// for a type that has none.
func (n *Notes) note(typ string) **inflight {
	switch typ {
	case typePause:
		return &n.pause
	case typeResume:
		return &n.resume
	case typeInterrupt:
		return &n.interrupt
	case typeRespond:
		return &n.respond
	case typeSendInput:
		return &n.input
	}
	return nil
}

// notes are the pending notes, in a fixed order.
func (n *Notes) notes() []*inflight {
	return []*inflight{n.pause, n.resume, n.interrupt, n.respond, n.input}
}

// disarm drops f's note, if it is still armed.
func (n *Notes) disarm(f *inflight) {
	if note := n.note(f.cmd.typ); note != nil && *note == f {
		*note = nil
	}
}

// reject decides f's ack as control.rejected and returns it.
func (n *Notes) reject(f *inflight, r *rejection, at time.Time) *aep.Event {
	ev := n.view.NewEvent("control.rejected", at, ackKey(f.cmd))
	ev.Cause = f.cmd.id
	if ev.Data != nil {
		ev.Data["reason"] = r.reason
		if detail, ok := n.view.Redacted(ev, r.detail); ok && detail != "" {
			ev.Data["detail"] = detail
		}
	}
	n.decide(f, decision{ack: ev, reason: r.reason})
	return ev
}

// accept decides f's ack as control.accepted (golden: no data) and
// returns it.
func (n *Notes) accept(f *inflight, at time.Time) *aep.Event {
	ev := n.view.NewEvent("control.accepted", at, ackKey(f.cmd))
	ev.Cause = f.cmd.id
	ev.Data = nil
	n.decide(f, decision{ack: ev})
	return ev
}

func ackKey(c *command) string { return "ack\n" + c.source + "\n" + c.id }

// result is how a forwarded command's REST write ended, as the reply
// guard reports it.
type result struct {
	// written: the server answered 2xx.
	written bool
	// willTry: the reply guard expired first; the write may still land.
	willTry bool
	// rejection: the server refused (4xx) or could not be reached (busy).
	rejection *rejection
}

// settle applies a write's result: the ack unless one was already
// decided, the send_input outcome at 2xx, and, when the write failed, the
// note dropped (the flip it waited for will not come).
func (n *Notes) settle(f *inflight, r result, at time.Time) []*aep.Event {
	var out []*aep.Event
	if f.decision.ack == nil {
		if r.rejection != nil {
			out = append(out, n.reject(f, r.rejection, at))
		} else {
			out = append(out, n.accept(f, at))
		}
	}
	if !r.willTry && n.writing == f {
		n.writing = nil
		close(f.answered)
	}
	if r.rejection != nil {
		n.disarm(f)
	}
	if r.written && f.cmd.typ == typeSendInput {
		n.disarm(f) // its outcome is this answer
		if !f.inputSent {
			out = append(out, n.inputSent(f, at))
		}
	}
	return out
}

// inputSent is a send_input's outcome, x.openhands.input.sent, which
// never echoes the text.
func (n *Notes) inputSent(f *inflight, at time.Time) *aep.Event {
	f.inputSent = true
	sent := n.view.NewEvent("x.openhands.input.sent", at, "input\n"+f.cmd.source+"\n"+f.cmd.id)
	sent.Cause = f.cmd.id
	return sent
}

// Said applies the gate to the batch mapped from a user message whose
// text the stream shows, under the conversation's lock: when it is the
// text of the pending send_input, the write landed, so the command is
// acked control.accepted if still undecided, and its input.sent emitted
// if not yet, both before the message's own events. That happens before
// the REST answer when the stream is quicker and, after a restart, in
// place of an answer lost with the process.
func (n *Notes) Said(text string, out []*aep.Event, at time.Time) []*aep.Event {
	if n == nil || n.input == nil || n.input.cmd.digest != digest(text) {
		return out
	}
	f := n.input
	n.input = nil
	var first []*aep.Event
	if f.decision.ack == nil {
		first = append(first, n.accept(f, at))
	}
	if !f.inputSent {
		first = append(first, n.inputSent(f, at))
	}
	return append(first, out...)
}

// Decorate applies the gate to one mapped batch, under the conversation's
// lock, after the mapper has taken in the vendor event (prev is the status
// before it). It leaves the pure mapping's output as pinned and adds only
// what the gate owns:
//   - an answerable gate gives attention.requested the approve/deny
//     options and respond_via [control];
//   - a status flip out of waiting_for_confirmation while a respond is
//     settling gains attention.answered (the echoed answer) before
//     attention.resolved, both caused by the command;
//   - a flip to paused under a pending interrupt or pause, or to running
//     under a pending resume, has its state event caused by the command;
//   - the first outcome of a command whose ack is still undecided acks it
//     control.accepted first (the stream shows the write landed), so an
//     ack never follows its outcome.
//
// Any status change clears every note but a send_input's (Said).
func (n *Notes) Decorate(prev string, out []*aep.Event, at time.Time) []*aep.Event {
	if n == nil {
		return out
	}
	if n.answerable {
		for _, ev := range out {
			if ev.Type == "attention.requested" && ev.Data != nil {
				ev.Data["options"] = []any{
					map[string]any{"id": optionApprove, "label": "Approve"},
					map[string]any{"id": optionDeny, "label": "Deny"},
				}
				ev.Data["respond_via"] = []any{"control"}
			}
		}
	}
	next := n.view.Status()
	if next == prev {
		return out
	}
	var acks []*aep.Event
	ackFirst := func(f *inflight) {
		if f.decision.ack == nil {
			acks = append(acks, n.accept(f, at))
		}
	}
	if f := n.respond; f != nil && prev == statusWaiting && next != statusPaused && next != statusDeleting {
		if i := slices.IndexFunc(out, func(ev *aep.Event) bool {
			return ev.Type == "attention.resolved" && ev.Subject == f.cmd.subject
		}); i >= 0 {
			out[i].Cause = f.cmd.id
			out = slices.Insert(out, i, n.answered(f, at))
			ackFirst(f)
		}
	}
	var caused *inflight
	switch next {
	case statusPaused:
		caused = cmp.Or(n.interrupt, n.pause) // the escalation made it instant
	case statusRunning:
		caused = n.resume
	}
	if caused != nil {
		if i := slices.IndexFunc(out, func(ev *aep.Event) bool {
			return ev.Type == "state.delta" || ev.Type == "state.snapshot"
		}); i >= 0 {
			out[i].Cause = caused.cmd.id
			ackFirst(caused)
		}
	}
	n.pause, n.resume, n.interrupt, n.respond = nil, nil, nil, nil
	if len(acks) == 0 {
		return out
	}
	return append(acks, out...)
}

// answered is the attention.answered a settling respond becomes once the
// stream shows the request left waiting: the echoed answer (its text
// redaction-gated), via control, by the sender.
func (n *Notes) answered(f *inflight, at time.Time) *aep.Event {
	ev := n.view.NewEvent("attention.answered", at, "answered\n"+f.cmd.source+"\n"+f.cmd.id)
	ev.Subject, ev.Cause = f.cmd.subject, f.cmd.id
	if ev.Data != nil {
		answer := map[string]any{"option": f.cmd.option}
		if text, ok := n.view.Redacted(ev, f.cmd.text); ok && text != "" {
			answer["text"] = text
		}
		ev.Data["answer"] = answer
		ev.Data["via"] = "control"
		if f.cmd.agent != "" {
			ev.Data["by"] = f.cmd.agent
		}
	}
	return ev
}
