// Package stream checks the AEP 0.1 rules that span events, over a stream
// fed in arrival order: the stream checkers of the conformance runner
// (conformance/run.py) plus the kind:"form" answer rule of AEP-0006.
// Single-event validity is package schema's job.
package stream

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The rules a Checker enforces. Add wraps exactly one of them, so callers
// and tests tell them apart with errors.Is.
var (
	// ErrOrdering: within (source, session), the position (epoch, seq)
	// must strictly increase inside an epoch, and epoch never decreases
	// (AEP-0001 §7). Gaps are legal; a new epoch may restart seq anywhere.
	ErrOrdering = errors.New("ordering (AEP-0001 §7)")
	// ErrIDCollision: one (source, id) names two different events
	// (AEP-0001 §5.1 #2, §7.4).
	ErrIDCollision = errors.New("id collision (AEP-0001 §7.4)")
	// ErrLifecycle: a second terminal for a run, a second session.ended, or
	// a session.ended while an attention request is still open (AEP-0002
	// §2 convention 5, §7 rule 2).
	ErrLifecycle = errors.New("lifecycle (AEP-0002 §2, §7)")
	// ErrAckExclusivity: a second ack decision for one command (AEP-0004 §3).
	ErrAckExclusivity = errors.New("ack exclusivity (AEP-0004 §3)")
	// ErrFormValues: an attention.answered whose answer.values break the
	// kind:"form" request they answer (AEP-0006).
	ErrFormValues = errors.New("form values (AEP-0006)")
)

// Checker judges a stream of events in arrival order. The zero value is
// ready to use.
//
// Deduplication comes first, as every consumer's does (AEP-0001 §7 rule 4):
// an event whose (source, id) was seen with identical content is a legal
// redelivery; Add accepts it and leaves the state unchanged, so a
// redelivered run terminal or a re-sent position is not judged twice
// (AEP-0002 §2 convention 5). run.py's checkers skip that step and expect a
// deduplicated stream. An event Add rejects leaves the state unchanged too,
// so the caller may keep feeding the stream.
//
// State is kept per key, compactly: 32 bytes per distinct (source, id), a
// position, the runs that ended and the open attention requests per
// (source, session), and 16 bytes per acknowledged command. It grows with
// the stream; a Checker is meant for a test or a bounded relay run.
//
// A Checker is not safe for concurrent use.
type Checker struct {
	events   map[digest]digest // (source, id) → digest of the canonical event
	sessions map[sessionKey]*session
	acks     map[digest]struct{} // (source, cause) of each ack decision
}

// digest is the first 16 bytes of a SHA-256.
type digest [16]byte

type sessionKey struct{ source, session string }

// session is the state of one (source, session).
type session struct {
	positioned bool
	epoch, seq int64
	ended      bool
	terminated map[string]struct{} // runs that have had a terminal
	// open holds the attention requests awaiting resolved/timeout, by id;
	// the value is the request's form fields when it is kind:"form".
	open map[string][]formField
}

var runTerminals = []string{"run.finished", "run.failed", "run.cancelled"}

// Add judges the next event of the stream. It returns nil, an error
// wrapping the first rule the event breaks (ErrOrdering, ErrIDCollision,
// ErrLifecycle, ErrAckExclusivity or ErrFormValues), or an error saying
// the event could not be serialized.
func (c *Checker) Add(ev *aep.Event) error {
	if ev == nil {
		return errors.New("aep stream: nil event")
	}
	if c.events == nil {
		c.events = make(map[digest]digest)
		c.sessions = make(map[sessionKey]*session)
		c.acks = make(map[digest]struct{})
	}
	sum, err := aep.CanonicalSum(ev)
	if err != nil {
		return fmt.Errorf("aep stream: canonical form of %s %s: %w", ev.Type, ev.ID, err)
	}
	var content digest
	copy(content[:], sum[:])

	idKey := pairDigest(ev.Source, ev.ID)
	if seen, ok := c.events[idKey]; ok {
		if seen == content {
			return nil // redelivery
		}
		return broken(ErrIDCollision, ev, "this (source, id) already named a different event")
	}
	st := c.sessions[sessionKey{ev.Source, ev.Session}]
	if reason := checkOrdering(st, ev); reason != "" {
		return broken(ErrOrdering, ev, reason)
	}
	if reason := checkLifecycle(st, ev); reason != "" {
		return broken(ErrLifecycle, ev, reason)
	}
	ackKey, isAck := ackDigest(ev)
	if _, dup := c.acks[ackKey]; isAck && dup {
		return broken(ErrAckExclusivity, ev, fmt.Sprintf("command %s was already acknowledged by a different event", ev.Cause))
	}
	if reason := checkFormAnswer(st, ev); reason != "" {
		return broken(ErrFormValues, ev, reason)
	}

	c.events[idKey] = content
	if isAck {
		c.acks[ackKey] = struct{}{}
	}
	if ev.Session != "" {
		if st == nil {
			st = &session{}
			c.sessions[sessionKey{strings.Clone(ev.Source), strings.Clone(ev.Session)}] = st
		}
		st.record(ev)
	}
	return nil
}

func broken(rule error, ev *aep.Event, reason string) error {
	return fmt.Errorf("aep stream: %w: %s %s (source %s, session %q): %s", rule, ev.Type, ev.ID, ev.Source, ev.Session, reason)
}

// checkOrdering applies the position rule to events that carry both
// session and seq.
func checkOrdering(st *session, ev *aep.Event) string {
	if ev.Session == "" || ev.Seq == nil || st == nil || !st.positioned {
		return ""
	}
	epoch := ev.EffectiveEpoch()
	switch {
	case epoch < st.epoch:
		return fmt.Sprintf("epoch %d after epoch %d", epoch, st.epoch)
	case epoch == st.epoch && *ev.Seq <= st.seq:
		return fmt.Sprintf("seq %d after seq %d in epoch %d", *ev.Seq, st.seq, epoch)
	}
	return ""
}

// checkLifecycle applies terminal exclusivity (runs and sessions, across
// epochs) and close-before-end for attention requests.
func checkLifecycle(st *session, ev *aep.Event) string {
	if ev.Session == "" || st == nil {
		return ""
	}
	switch {
	case ev.Run != "" && slices.Contains(runTerminals, ev.Type):
		if _, ok := st.terminated[ev.Run]; ok {
			return fmt.Sprintf("run %q already had a terminal", ev.Run)
		}
	case ev.Type == "session.ended":
		if st.ended {
			return "the session already ended with a different session.ended"
		}
		if len(st.open) > 0 {
			open := slices.Sorted(maps.Keys(st.open))
			return fmt.Sprintf("attention request %s is still open (resolve or time it out first)", open[0])
		}
	}
	return ""
}

// record applies an accepted event to its session's state.
func (st *session) record(ev *aep.Event) {
	if ev.Seq != nil {
		st.positioned, st.epoch, st.seq = true, ev.EffectiveEpoch(), *ev.Seq
	}
	switch {
	case ev.Run != "" && slices.Contains(runTerminals, ev.Type):
		if st.terminated == nil {
			st.terminated = make(map[string]struct{})
		}
		st.terminated[strings.Clone(ev.Run)] = struct{}{}
	case ev.Type == "session.ended":
		st.ended = true
	case ev.Type == "attention.requested":
		if st.open == nil {
			st.open = make(map[string][]formField)
		}
		st.open[strings.Clone(ev.ID)] = requestedForm(ev)
	case ev.Type == "attention.resolved" || ev.Type == "attention.timeout":
		delete(st.open, ev.Subject)
	}
}

// ackDigest keys an ack decision by (source, cause); only control.accepted
// and control.rejected carrying a cause are acks.
func ackDigest(ev *aep.Event) (digest, bool) {
	if ev.Cause == "" || (ev.Type != "control.accepted" && ev.Type != "control.rejected") {
		return digest{}, false
	}
	return pairDigest(ev.Source, ev.Cause), true
}

// pairDigest hashes two strings unambiguously (the first is length
// prefixed), so map keys need not hold the strings.
func pairDigest(a, b string) digest {
	var stack [256]byte
	buf := binary.BigEndian.AppendUint64(stack[:0], uint64(len(a)))
	buf = append(buf, a...)
	buf = append(buf, b...)
	sum := sha256.Sum256(buf)
	var d digest
	copy(d[:], sum[:])
	return d
}
