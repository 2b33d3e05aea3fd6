package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// ErrInvalidEvent is wrapped by every DecodeEvent refusal.
var ErrInvalidEvent = errors.New("invalid openhands event")

// Event is one agent-server event frame, decoded leniently: the vendor union
// is extra="forbid" and grows by release, so every field is kept, known or
// not, and only the base fields are typed.
type Event struct {
	// Fields is the whole frame, numbers as json.Number.
	Fields map[string]any

	kind, id, timestamp, source string
	numbersAsText               int
	// at is timestamp as ParseVendorTime reads it, once for the mapping
	// and the decorator; timed says it could.
	at    time.Time
	timed bool
}

// At is no vendor event, stamped ts: what the receiver emits on its own at
// a vendor time (a session's end at the newest one it saw) is decorated as
// of At(ts), and as of the zero Event at no vendor time.
func At(ts string) Event {
	ev := Event{timestamp: ts}
	ev.at, ev.timed = ParseVendorTime(ts)
	return ev
}

// timeOr is the event's vendor time, or fallback when it has none.
func (e Event) timeOr(fallback time.Time) time.Time {
	if e.timed {
		return e.at
	}
	return fallback
}

// Kind is the vendor class name, the union's discriminator.
func (e Event) Kind() string { return e.kind }

// ID is the vendor event id, the dedupe key across replay and reconnect.
func (e Event) ID() string { return e.id }

// Timestamp is the vendor time, naive server-local ISO 8601 with or without
// microseconds, exactly as sent.
func (e Event) Timestamp() string { return e.timestamp }

// Source is agent, user, environment or hook; "" when absent or not a string.
func (e Event) Source() string { return e.source }

// NumbersAsText is how many of the event's numbers were beyond float64
// range and are carried as strings of their digits (textNumbers).
func (e Event) NumbersAsText() int { return e.numbersAsText }

// DecodeEvent decodes one event frame. It refuses only what leaves the event
// unidentifiable: a frame that is not a JSON object, a missing or empty kind
// or id, and a kind, id or timestamp that is not a string. parent_id, present
// or stripped by the transport, makes no difference.
func DecodeEvent(raw []byte) (Event, error) {
	v, err := aep.DecodeValue(raw)
	if err != nil {
		return Event{}, fmt.Errorf("%w: decode frame: %w", ErrInvalidEvent, err)
	}
	return EventOf(v)
}

// EventOf is DecodeEvent for a frame already decoded as aep.DecodeValue
// decodes it (numbers as json.Number): a socket envelope decoded whole
// hands its event over without a second pass over the bytes. It takes v
// over: a number beyond float64 range is rewritten in place (textNumbers).
func EventOf(v any) (Event, error) {
	fields, ok := v.(map[string]any)
	if !ok {
		return Event{}, fmt.Errorf("%w: frame is not a JSON object", ErrInvalidEvent)
	}
	ev := Event{Fields: fields}
	var err error
	if ev.kind, err = baseField(fields, "kind", true); err != nil {
		return Event{}, err
	}
	if ev.id, err = baseField(fields, "id", true); err != nil {
		return Event{}, err
	}
	if ev.timestamp, err = baseField(fields, "timestamp", false); err != nil {
		return Event{}, err
	}
	ev.at, ev.timed = ParseVendorTime(ev.timestamp)
	ev.source, _ = fields["source"].(string)
	_, ev.numbersAsText = textNumbers(fields)
	return ev, nil
}

// baseField reads a base field, which must be a string if present, and a
// nonempty one if required.
func baseField(fields map[string]any, name string, required bool) (string, error) {
	raw, present := fields[name]
	if !present {
		if required {
			return "", fmt.Errorf("%w: missing %q", ErrInvalidEvent, name)
		}
		return "", nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("%w: %q is not a string", ErrInvalidEvent, name)
	}
	if required && s == "" {
		return "", fmt.Errorf("%w: %q is empty", ErrInvalidEvent, name)
	}
	return s, nil
}

// textNumbers rewrites, in place, each number in v that no float64 holds
// (beyond ±1.8e308: valid JSON, which Python writes) as a string of its
// exact digits, and counts them. AEP's canonical JSON and the log record
// projection carry IEEE-754 doubles only, so such a number would make a
// mapped event unprojectable; as text it rides, digit for digit, and the
// rest of the event with it.
func textNumbers(v any) (any, int) {
	n := 0
	switch t := v.(type) {
	case json.Number:
		if overflows(t) {
			return string(t), 1
		}
	case map[string]any:
		for k, x := range t {
			if y, m := textNumbers(x); m > 0 {
				t[k], n = y, n+m
			}
		}
	case []any:
		for i, x := range t {
			if y, m := textNumbers(x); m > 0 {
				t[i], n = y, n+m
			}
		}
	}
	return v, n
}

// overflows reports whether a JSON number is beyond float64 range.
func overflows(n json.Number) bool {
	s := string(n)
	if len(s) < 300 && !strings.ContainsAny(s, "eE") {
		return false // under 300 digits and no exponent: below 1e300
	}
	f, _ := strconv.ParseFloat(s, 64) // a JSON number fails only out of range
	return math.IsInf(f, 0)
}

// knownKinds is the agent server's event union as of v1.43.1, plus the
// socket-only ServerErrorEvent. Anything else is a kind from the future.
var knownKinds = map[string]bool{
	"MessageEvent": true, "ActionEvent": true, "ObservationEvent": true,
	"UserRejectObservation": true, "AgentErrorEvent": true, "SystemPromptEvent": true,
	"Condensation": true, "CondensationRequest": true, "CondensationSummaryEvent": true,
	"ConversationStateUpdateEvent": true, "ConversationErrorEvent": true,
	"PauseEvent": true, "InterruptEvent": true, "StreamingDeltaEvent": true,
	"TokenEvent": true, "HookExecutionEvent": true, "ACPToolCallEvent": true,
	"LLMCompletionLogEvent": true, "ServerErrorEvent": true,
}

// KnownKind reports whether kind belongs to the event union this mapping
// was written against (a bounded label set for metrics).
func KnownKind(kind string) bool { return knownKinds[kind] }

// Transient reports whether the server publishes this event without
// persisting it to the conversation log (full_state snapshots, streaming
// deltas, socket errors, in-memory condensation summaries): it never shows
// up in events/search, so its timestamp is no resume point.
func (e Event) Transient() bool {
	switch e.kind {
	case kindStreamingDelta, "ServerErrorEvent", "CondensationSummaryEvent":
		return true
	case "ConversationStateUpdateEvent":
		return e.Fields["key"] == "full_state"
	}
	return false
}
