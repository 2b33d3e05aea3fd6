package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"slices"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// keptDecisions bounds the decided commands one conversation remembers in
// its State, which the receiver writes with every batch of the
// conversation: AEP-0004 sets no horizon (a recorded ack lives as long as
// the dedupe state), and a sender retries within its ack window, so the
// commands a restart must still answer are the last few. 64 covers every
// write the default rate limit allows in a 10 s window (burst 10, then
// 1/s) with room for the refusals around them, and keeps the state small
// (an ack is a few hundred bytes).
const keptDecisions = 64

// State is what the gate keeps of one conversation across a restart. The
// receiver takes it with the conversation's durable state, in the storage
// write that carries the batch of the acks it records, and hands it back
// to the gate's NewNotesFunc when it builds the conversation again. The
// zero value is nothing remembered.
type State struct {
	// Decided are the conversation's most recent decided commands, oldest
	// first, at most keptDecisions.
	Decided []Decision `json:"decided,omitempty"`
	// Pending are the commands written, or about to be, whose ack is
	// undecided: restored, their notes let the stream decide them (their
	// outcome seen: control.accepted), or a redelivery judge them afresh.
	Pending []Pending `json:"pending,omitempty"`
}

// Pending is a forwarded command with an undecided ack: what its note
// needs to recognise its outcome. Operator text is never kept: a
// send_input keeps the digest of its text, a respond no deny reason (an
// attention.answered after a restart echoes the option only).
type Pending struct {
	Source  string `json:"source"`
	ID      string `json:"id"`
	Type    string `json:"type"`
	Agent   string `json:"agent,omitempty"`
	Subject string `json:"subject,omitempty"`
	Option  string `json:"option,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// Decision is one decided command: its AEP-0004 idempotency key and its
// recorded ack, already sequenced in the conversation's session.
type Decision struct {
	Source string     `json:"source"`
	ID     string     `json:"id"`
	Ack    *aep.Event `json:"ack"`
	// Reason is the control.rejected reason, "" for control.accepted (the
	// ack carries it only when its capture level has data).
	Reason string `json:"reason,omitempty"`
}

// State returns what of the conversation's control state survives a
// restart. It is used under the conversation's lock; a nil *Notes has
// nothing.
func (n *Notes) State() State {
	if n == nil {
		return State{}
	}
	s := State{Decided: slices.Clone(n.decided)}
	for _, f := range n.notes() {
		if f != nil && f.decision.ack == nil {
			c := f.cmd
			s.Pending = append(s.Pending, Pending{
				Source: c.source, ID: c.id, Type: c.typ, Agent: c.agent, Subject: c.subject, Option: c.option, Digest: c.digest,
			})
		}
	}
	return s
}

// restore puts a conversation that has not run yet in state s, as State
// returned it before a restart. A record without an ack (a damaged
// state) is dropped, and so is a pending command of a type that has no
// note.
func (n *Notes) restore(s State) {
	n.decided = slices.DeleteFunc(slices.Clone(s.Decided), func(d Decision) bool { return d.Ack == nil })
	n.decided = n.decided[max(0, len(n.decided)-keptDecisions):]
	for _, p := range s.Pending {
		if note := n.note(p.Type); note != nil {
			*note = &inflight{restored: true, cmd: &command{
				id: p.ID, source: p.Source, agent: p.Agent, typ: p.Type, subject: p.Subject, option: p.Option, digest: p.Digest,
			}}
		}
	}
}

// restoredNote is the undecided note a restart restored for k, nil if
// there is none.
func (n *Notes) restoredNote(k commandKey) *inflight {
	if n == nil {
		return nil
	}
	for _, f := range n.notes() {
		if f != nil && f.restored && f.decision.ack == nil && f.cmd.source == k.source && f.cmd.id == k.id {
			return f
		}
	}
	return nil
}

// decide records d as f's decision: in the conversation's memory and,
// through f.decided, the gate's.
func (n *Notes) decide(f *inflight, d decision) {
	f.decision = d
	n.decided = append(n.decided, Decision{Source: f.cmd.source, ID: f.cmd.id, Ack: d.ack, Reason: d.reason})
	if len(n.decided) > keptDecisions {
		n.decided = slices.Delete(n.decided, 0, 1)
	}
	if f.decided != nil {
		f.decided(d)
	}
}

// recorded returns the decision the conversation remembers for k.
func (n *Notes) recorded(k commandKey) (decision, bool) {
	if n == nil {
		return decision{}, false
	}
	for _, d := range n.decided {
		if d.Source == k.source && d.ID == k.id {
			return decision{ack: d.Ack, reason: d.Reason}, true
		}
	}
	return decision{}, false
}
