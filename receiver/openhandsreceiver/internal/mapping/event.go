package mapping

import (
	"errors"
	"fmt"

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

// DecodeEvent decodes one event frame. It refuses only what leaves the event
// unidentifiable: a frame that is not a JSON object, a missing or empty kind
// or id, and a kind, id or timestamp that is not a string. parent_id, present
// or stripped by the transport, makes no difference.
func DecodeEvent(raw []byte) (Event, error) {
	v, err := aep.DecodeValue(raw)
	if err != nil {
		return Event{}, fmt.Errorf("%w: decode frame: %w", ErrInvalidEvent, err)
	}
	fields, ok := v.(map[string]any)
	if !ok {
		return Event{}, fmt.Errorf("%w: frame is not a JSON object", ErrInvalidEvent)
	}
	ev := Event{Fields: fields}
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{
		{"kind", &ev.kind, true},
		{"id", &ev.id, true},
		{"timestamp", &ev.timestamp, false},
	} {
		raw, present := fields[f.name]
		if !present {
			if f.required {
				return Event{}, fmt.Errorf("%w: missing %q", ErrInvalidEvent, f.name)
			}
			continue
		}
		s, ok := raw.(string)
		if !ok {
			return Event{}, fmt.Errorf("%w: %q is not a string", ErrInvalidEvent, f.name)
		}
		if f.required && s == "" {
			return Event{}, fmt.Errorf("%w: %q is empty", ErrInvalidEvent, f.name)
		}
		*f.dst = s
	}
	ev.source, _ = fields["source"].(string)
	return ev, nil
}
