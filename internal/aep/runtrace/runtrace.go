// Package runtrace places AEP events in the trace of their run: one trace
// per run, the run as the root span, each tool call and each attention wait
// a child span. Every id is derived from facts the events carry (source
// without its query, run, tool call id, attention request id), never from
// local state, so an emitter that stamps traceparent and a consumer that
// builds the spans agree on the ids across restarts, replicas and
// processes. A tool call or wait that belongs to no run is a trace of its
// own (LocateWithoutRun).
package runtrace

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Kind is the span an event belongs to within its run.
type Kind int

const (
	// KindRun is the run's root span: run.* events and every other event
	// of the run that is not a tool call's or an attention wait's.
	KindRun Kind = iota
	// KindTool is one tool call: tool.requested and its answers.
	KindTool
	// KindAttention is one wait for a human: attention.requested to its
	// resolution or timeout.
	KindAttention
)

// Position is where an event sits in its run's trace.
type Position struct {
	Kind    Kind
	TraceID [16]byte
	SpanID  [8]byte
	// ParentID is the run span's id for a child span, zero for the run.
	ParentID [8]byte
}

// Locate returns the position of ev in its run's trace; false when ev
// belongs to no run (no run attribute) or to a child span it cannot name.
//
// A tool span is keyed by data.tool.call_id when the event carries one,
// else by the tool.requested id (the event's own id on tool.requested, its
// cause on the answers). An attention span is keyed by the
// attention.requested id (own id, else subject, else cause).
func Locate(ev *aep.Event) (Position, bool) {
	if ev.Run == "" {
		return Position{}, false
	}
	run := runKey{emitter(ev.Source), ev.Run}
	pos := Position{Kind: KindRun, TraceID: traceID(run), SpanID: spanID(run, "run", "")}
	kind, label, key := childKey(ev)
	if kind == KindRun {
		return pos, true
	}
	if key == "" {
		return Position{}, false
	}
	pos.Kind, pos.ParentID = kind, pos.SpanID
	pos.SpanID = spanID(run, label, key)
	return pos, true
}

// childKey names the child span an event belongs to: its kind, a label
// and the id after it (empty when the event names none); KindRun for an
// event of no child span.
func childKey(ev *aep.Event) (kind Kind, label, key string) {
	switch {
	case strings.HasPrefix(ev.Type, "tool."):
		label, key = toolKey(ev)
		return KindTool, label, key
	case strings.HasPrefix(ev.Type, "attention."):
		return KindAttention, "attention ", attentionKey(ev)
	}
	return KindRun, "", ""
}

// runKey names a run: its emitter and run id.
type runKey struct{ emitter, run string }

// emitter is the source without its query: an emitter may qualify its
// source by generation (the openhands receiver's ?epoch= after a restart
// without storage), and the run it reports is still the same run.
func emitter(source string) string {
	if i := strings.IndexByte(source, '?'); i >= 0 {
		return source[:i]
	}
	return source
}

// Traceparent is the W3C traceparent of the position (version 00, sampled).
func (p Position) Traceparent() string {
	var b strings.Builder
	b.Grow(55)
	b.WriteString("00-")
	b.WriteString(hex.EncodeToString(p.TraceID[:]))
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(p.SpanID[:]))
	b.WriteString("-01")
	return b.String()
}

// ParseTraceparent reads a W3C traceparent's trace and span ids; false
// when it is not one (version 00's shape, ids not all zero).
func ParseTraceparent(traceparent string) (trace [16]byte, span [8]byte, ok bool) {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 2*len(trace) || len(parts[2]) != 2*len(span) {
		return trace, span, false
	}
	if _, err := hex.Decode(trace[:], []byte(parts[1])); err != nil {
		return trace, span, false
	}
	if _, err := hex.Decode(span[:], []byte(parts[2])); err != nil {
		return trace, span, false
	}
	return trace, span, trace != [16]byte{} && span != [8]byte{}
}

// toolKey names a tool span: a label and the id after it.
func toolKey(ev *aep.Event) (label, id string) {
	if tool, ok := ev.Data["tool"].(map[string]any); ok {
		if id, ok := tool["call_id"].(string); ok && id != "" {
			return "tool call ", id
		}
	}
	requested := ev.Cause
	if ev.Type == "tool.requested" {
		requested = ev.ID
	}
	return "tool event ", requested
}

func attentionKey(ev *aep.Event) string {
	switch {
	case ev.Type == "attention.requested":
		return ev.ID
	case ev.Subject != "":
		return ev.Subject
	}
	return ev.Cause
}

// traceID and spanID hash "aep trace|span\n<emitter>\n<run>[\n<label><key>]";
// an all-zero id is invalid in W3C trace context, so that one value (1 in
// 2^128, 2^64) is nudged. The text is assembled in a stack buffer: every
// event of a run is located.
func traceID(run runKey) [16]byte {
	return labelledTraceID(run, "", "")
}

// labelledTraceID is traceID with a span's label and key in the text: the
// trace of a tool call or wait that belongs to no run (runless.go).
func labelledTraceID(run runKey, label, key string) [16]byte {
	sum := idSum("aep trace", run, label, key)
	var id [16]byte
	copy(id[:], sum[:])
	if id == ([16]byte{}) {
		id[15] = 1
	}
	return id
}

func spanID(run runKey, label, key string) [8]byte {
	sum := idSum("aep span", run, label, key)
	var id [8]byte
	copy(id[:], sum[:])
	if id == ([8]byte{}) {
		id[7] = 1
	}
	return id
}

func idSum(domain string, run runKey, label, key string) [sha256.Size]byte {
	var buf [256]byte
	b := append(buf[:0], domain...)
	b = append(append(b, '\n'), run.emitter...)
	b = append(append(b, '\n'), run.run...)
	if label != "" {
		b = append(append(append(b, '\n'), label...), key...)
	}
	return sha256.Sum256(b)
}
