package vendormap

import (
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Vendor names a vendor profile; it is also the AEP agent.
type Vendor string

// The profiles.
const (
	Codex  Vendor = "codex"
	VSCode Vendor = "vscode"
)

// Vendors lists every profile.
var Vendors = []Vendor{Codex, VSCode}

const (
	attrEventName      = "event.name"
	attrEventTimestamp = "event.timestamp"
	attrServiceName    = "service.name"
	attrHostName       = "host.name"
	attrSessionID      = "session.id"
	attrConversationID = "conversation.id"
	attrModel          = "model"
	attrRequestModel   = "gen_ai.request.model"
)

// profile is what one vendor's channel looks like.
type profile struct {
	// prefix marks the vendor's own event names.
	prefix string
	// serviceNames mark the vendor's resource, for its records whose names
	// are not its own (the GenAI convention's events).
	serviceNames []string
	// sessionFrom reads the AEP session; "" when the record has none.
	sessionFrom func(Record) string
	// companion maps each known event name to its type suffix,
	// x.{agent}.otel.{suffix}; other names are unknown.
	companion map[string]string
	// envelope are attributes that become envelope facts or identity and
	// are never copied into data.
	envelope map[string]bool
	// gated are content attributes and the capture level they need.
	gated map[string]aep.Capture
	// primary maps a known record to its core event in primary mode.
	primary func(suffix string, rec Record, opts Options) primaryResult
	// usage, where the vendor reports a model call's usage in its own
	// names, puts it on the event's data in AEP's (usage.go); nil where
	// the vendor already sends AEP's names.
	usage func(suffix string, data, attrs map[string]any)
}

var profiles = map[Vendor]*profile{
	Codex: {
		prefix: "codex.",
		sessionFrom: func(r Record) string {
			return stringAttr(r.Attributes, attrConversationID)
		},
		companion: map[string]string{
			"codex.conversation_starts": "conversation_starts",
			"codex.api_request":         "api_request",
			"codex.sse_event":           "sse_event",
			"codex.websocket_request":   "websocket_request",
			"codex.websocket_event":     "websocket_event",
			"codex.user_prompt":         "user_prompt",
			"codex.tool_decision":       "tool_decision",
			"codex.tool_result":         "tool_result",
		},
		envelope: set(attrEventName, attrEventTimestamp, attrConversationID, "app.version", "originator"),
		gated: map[string]aep.Capture{
			// The vendor sends "[REDACTED]" unless its log_user_prompt is on;
			// that placeholder is dropped at every level (see gatedValue).
			"prompt":          aep.CaptureRedacted,
			"arguments":       aep.CaptureRedacted,
			"output":          aep.CaptureRedacted,
			"error":           aep.CaptureRedacted,
			"error.message":   aep.CaptureRedacted,
			"auth.error":      aep.CaptureRedacted,
			"user.email":      aep.CaptureFull,
			"user.account_id": aep.CaptureFull,
		},
		primary: codexPrimary,
		usage: func(suffix string, data, attrs map[string]any) {
			if suffix == "sse_event" {
				putCodexUsage(data, attrs)
			}
		},
	},
	VSCode: {
		prefix:       "copilot_chat.",
		serviceNames: []string{"copilot-chat"},
		sessionFrom: func(r Record) string {
			return stringAttr(r.Resource, attrSessionID)
		},
		companion: map[string]string{
			"copilot_chat.session.start":                "session.start",
			"copilot_chat.tool.call":                    "tool.call",
			"copilot_chat.agent.turn":                   "agent.turn",
			"copilot_chat.edit.feedback":                "edit.feedback",
			"gen_ai.client.inference.operation.details": "inference_details",
		},
		// The record's session.id is left out only where it repeats the
		// resource's (see companionData): on a start record it names the
		// chat, one of several in a window's session.
		envelope: set(attrEventName),
		gated: map[string]aep.Capture{
			"gen_ai.input.messages":      aep.CaptureRedacted,
			"gen_ai.output.messages":     aep.CaptureRedacted,
			"gen_ai.system_instructions": aep.CaptureRedacted,
			"gen_ai.tool.definitions":    aep.CaptureRedacted,
			"error.message":              aep.CaptureRedacted,
		},
		primary: vscodePrimary,
	},
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}
