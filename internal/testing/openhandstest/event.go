package openhandstest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Event is one OpenHands event as it travels on the wire: a JSON object with
// at least `kind`, `id`, `timestamp` and `source`. Numbers decoded by the stub
// are json.Number so that nothing is rounded.
type Event map[string]any

// ID returns the event's `id`, or "" when absent.
func (e Event) ID() string { return e.str("id") }

// Kind returns the event's `kind`, or "" when absent.
func (e Event) Kind() string { return e.str("kind") }

// Timestamp returns the event's naive local `timestamp`, or "" when absent.
func (e Event) Timestamp() string { return e.str("timestamp") }

// Source returns the event's `source`, or "" when absent.
func (e Event) Source() string { return e.str("source") }

// ParentID returns the event's `parent_id`, or "" when absent.
func (e Event) ParentID() string { return e.str("parent_id") }

func (e Event) str(key string) string {
	s, _ := e[key].(string)
	return s
}

// Event kinds the stub knows by name.
const (
	KindMessageEvent                 = "MessageEvent"
	KindActionEvent                  = "ActionEvent"
	KindObservationEvent             = "ObservationEvent"
	KindUserRejectObservation        = "UserRejectObservation"
	KindAgentErrorEvent              = "AgentErrorEvent"
	KindSystemPromptEvent            = "SystemPromptEvent"
	KindCondensation                 = "Condensation"
	KindCondensationRequest          = "CondensationRequest"
	KindCondensationSummaryEvent     = "CondensationSummaryEvent"
	KindConversationStateUpdateEvent = "ConversationStateUpdateEvent"
	KindConversationErrorEvent       = "ConversationErrorEvent"
	KindPauseEvent                   = "PauseEvent"
	KindInterruptEvent               = "InterruptEvent"
	KindStreamingDeltaEvent          = "StreamingDeltaEvent"
	KindTokenEvent                   = "TokenEvent"
	KindHookExecutionEvent           = "HookExecutionEvent"
	KindACPToolCallEvent             = "ACPToolCallEvent"
	KindLLMCompletionLogEvent        = "LLMCompletionLogEvent"
	KindServerErrorEvent             = "ServerErrorEvent"
)

// kindModules maps a kind to the Python module of its class: the events
// search compares `kind` against f"{module}.{ClassName}", so only the
// fully-qualified path matches.
var kindModules = map[string]string{
	KindMessageEvent:                 "openhands.sdk.event.llm_convertible.message",
	KindActionEvent:                  "openhands.sdk.event.llm_convertible.action",
	KindObservationEvent:             "openhands.sdk.event.llm_convertible.observation",
	KindUserRejectObservation:        "openhands.sdk.event.llm_convertible.observation",
	KindAgentErrorEvent:              "openhands.sdk.event.llm_convertible.observation",
	KindSystemPromptEvent:            "openhands.sdk.event.llm_convertible.system",
	KindCondensation:                 "openhands.sdk.event.condenser",
	KindCondensationRequest:          "openhands.sdk.event.condenser",
	KindCondensationSummaryEvent:     "openhands.sdk.event.condenser",
	KindConversationStateUpdateEvent: "openhands.sdk.event.conversation_state",
	KindConversationErrorEvent:       "openhands.sdk.event.conversation_error",
	KindPauseEvent:                   "openhands.sdk.event.user_action",
	KindInterruptEvent:               "openhands.sdk.event.user_action",
	KindStreamingDeltaEvent:          "openhands.sdk.event.streaming_delta",
	KindTokenEvent:                   "openhands.sdk.event.token",
	KindHookExecutionEvent:           "openhands.sdk.event.hook_execution",
	KindACPToolCallEvent:             "openhands.sdk.event.acp_tool_call",
	KindLLMCompletionLogEvent:        "openhands.sdk.event.llm_completion_log",
	KindServerErrorEvent:             "openhands.agent_server.models",
}

// KindFQN returns the fully-qualified class path the events search expects in
// its `kind` filter, e.g. "openhands.sdk.event.llm_convertible.message.MessageEvent".
// It returns "" for a kind the stub does not know.
func KindFQN(kind string) string {
	module, ok := kindModules[kind]
	if !ok {
		return ""
	}
	return module + "." + kind
}

// FormatTimestamp renders t the way Python's datetime.isoformat() renders a
// naive local datetime: microseconds are printed unless they are exactly 0.
func FormatTimestamp(t time.Time) string {
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04:05.000000")
}

// formatUTC renders an aware UTC datetime the way pydantic does (`Z` suffix).
func formatUTC(t time.Time) string {
	return FormatTimestamp(t.UTC()) + "Z"
}

// NewUUID returns a random uuid4 in the dashed form the server uses for event
// and conversation ids.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// parseUUID accepts the dashed and the 32-hex forms (as Python's UUID does
// for path parameters) and returns the dashed lowercase form.
func parseUUID(s string) (string, bool) {
	var h string
	switch len(s) {
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return "", false
		}
		h = s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	case 32:
		h = s
	default:
		return "", false
	}
	raw, err := hex.DecodeString(h)
	if err != nil {
		return "", false
	}
	h = hex.EncodeToString(raw)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], true
}

// hexID returns the dashless form used by conversation paging ids.
func hexID(dashed string) string {
	return dashed[0:8] + dashed[9:13] + dashed[14:18] + dashed[19:23] + dashed[24:36]
}

// marshalJSON encodes like Python's json module (no HTML escaping), without a
// trailing newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeEvent decodes a JSON object keeping numbers exact.
func decodeEvent(raw []byte) (Event, error) {
	v, err := aep.DecodeValue(raw) // numbers stay json.Number
	if err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	ev, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode event: not a JSON object")
	}
	return ev, nil
}

// stripForTransport applies the v1.31.2–v1.36.1 `event_transport_dump`: drop
// `parent_id` and any `tools[]` entry whose kind is not in the legacy
// allow-list.
func stripForTransport(ev Event) Event {
	out := make(Event, len(ev))
	for k, v := range ev {
		out[k] = v
	}
	delete(out, "parent_id")
	tools, ok := out["tools"].([]any)
	if !ok {
		return out
	}
	kept := make([]any, 0, len(tools))
	for _, tool := range tools {
		m, isMap := tool.(map[string]any)
		if !isMap {
			kept = append(kept, tool)
			continue
		}
		kind, isString := m["kind"].(string)
		if _, legacy := legacyToolKinds[kind]; m["kind"] == nil || isString && legacy {
			kept = append(kept, tool)
		}
	}
	out["tools"] = kept
	return out
}

var legacyToolKinds = map[string]struct{}{
	"ClientTool": {}, "FileEditorTool": {}, "FinishTool": {}, "InvokeSkillTool": {},
	"MCPToolDefinition": {}, "SwitchLLMTool": {}, "TaskTool": {}, "TaskToolSet": {},
	"TaskTrackerTool": {}, "TerminalTool": {}, "ThinkTool": {}, "WorkflowTool": {},
	"WorkflowToolSet": {},
}
