package mapping

import (
	"errors"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
)

// DefaultAgent is the envelope agent unless configured otherwise.
const DefaultAgent = "openhands"

// Redactor runs the AEP-0003 §9.4 redaction pipeline over content bound for
// a field annotated `redacted`. Value walks decoded JSON (maps, slices,
// json.Number) and may redact by key name; it must not modify its argument.
type Redactor interface {
	Text(s string) string
	Value(v any) any
}

// StreamRedactor redacts one text stream that arrives in chunks. Write
// returns the text that is safe to release now and holds back any tail that
// could still grow into a secret; Flush releases the redacted remainder at
// the end of the stream. A secret split across chunks therefore never
// appears whole in any released piece.
type StreamRedactor interface {
	Write(chunk string) string
	Flush() string
}

// CapturePolicy is the adapter's capture ceiling (AEP-0003 §9.1): a default
// level and per-category overrides. Core types are keyed by their category
// token (the first one: "attention", "tool", ...); the whole vendor plane
// (x.openhands.*) is keyed by "x".
type CapturePolicy struct {
	// Default applies to every category without an override; "" is metadata.
	Default aep.Capture
	// Categories maps a category token to its level, e.g. "attention" →
	// redacted (the RECOMMENDED override).
	Categories map[string]aep.Capture
}

// For returns the capture level an event of eventType is emitted at.
func (p CapturePolicy) For(eventType string) aep.Capture {
	category, _, _ := strings.Cut(eventType, ".")
	if c, ok := p.Categories[category]; ok {
		return c
	}
	return p.defaultLevel()
}

func (p CapturePolicy) defaultLevel() aep.Capture {
	if p.Default == "" {
		return aep.CaptureMetadata
	}
	return p.Default
}

// uses reports whether any type may be emitted at level.
func (p CapturePolicy) uses(level aep.Capture) bool {
	if p.defaultLevel() == level {
		return true
	}
	for _, c := range p.Categories {
		if c == level {
			return true
		}
	}
	return false
}

// Config is one conversation's mapping configuration.
type Config struct {
	// Agent is the envelope agent; "" is DefaultAgent.
	Agent string
	// Source is the envelope source; "" builds it with aep.SessionSource
	// from ServerHost, Agent and ConversationID.
	Source string
	// ConversationID is the OpenHands conversation id, the AEP session.
	ConversationID string
	// ServerHost is the agent server's host:port; it rides on
	// session.started at data.server.
	ServerHost string
	// Ceiling decides each event's capture level, at the source.
	Ceiling CapturePolicy
	// Deltas opts in to StreamingDeltaEvent (x.openhands.streaming.delta).
	Deltas bool
	// Redactor is required when any level is redacted.
	Redactor Redactor
	// NewStreamRedactor starts the redactor of one delta stream; required
	// when Deltas is on and the vendor plane ("x") is at redacted.
	NewStreamRedactor func() StreamRedactor
	// Lineage is where the conversation comes from; it rides on
	// session.started.
	Lineage Lineage
}

// withDefaults fills the defaults and checks every constraint.
func (c Config) withDefaults() (Config, error) {
	if c.ConversationID == "" {
		return c, errors.New("conversation id is required")
	}
	if c.Agent == "" {
		c.Agent = DefaultAgent
	}
	if c.Source == "" {
		if c.ServerHost == "" {
			return c, errors.New("source or server host is required")
		}
		c.Source = aep.SessionSource(c.ServerHost, c.Agent, c.ConversationID)
	}
	if err := errors.Join(capture.CheckCeiling("ceiling", c.Ceiling.defaultLevel(), c.Ceiling.Categories)...); err != nil {
		return c, err
	}
	if c.Redactor == nil && c.Ceiling.uses(aep.CaptureRedacted) {
		return c, errors.New("a redactor is required when a capture level is redacted")
	}
	if c.Deltas && c.NewStreamRedactor == nil && c.Ceiling.For(deltaType) == aep.CaptureRedacted {
		return c, errors.New("a stream redactor is required for deltas at capture redacted")
	}
	return c, nil
}
