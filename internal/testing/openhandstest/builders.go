package openhandstest

import (
	"encoding/json"
	"strconv"
	"strings"
)

// The builders below return realistic event payloads (exclude_none shape,
// every non-null default present) without `id`, `timestamp` or `parent_id`:
// [Conversation.Append] stamps those, as the server does when it emits an
// event. Set them on the returned map to pin them.

// textContent is the SDK's TextContent dump.
func textContent(text string) map[string]any {
	return map[string]any{"type": "text", "text": text, "cache_prompt": false}
}

// MessageEvent builds a MessageEvent. Source "user" gives an LLM role of
// "user"; any other source gives "assistant".
func MessageEvent(source, text string) Event {
	role := "assistant"
	if source == "user" {
		role = "user"
	}
	return Event{
		"kind":   KindMessageEvent,
		"source": source,
		"llm_message": map[string]any{
			"role":            role,
			"content":         []any{textContent(text)},
			"thinking_blocks": []any{},
		},
		"activated_skills": []any{},
		"extended_content": []any{},
	}
}

// ActionSpec describes an ActionEvent. Zero fields get realistic defaults.
type ActionSpec struct {
	// ToolName is the tool the LLM called (default "terminal").
	ToolName string
	// Action is the polymorphic action object including its `kind`
	// (default a TerminalAction running "ls").
	Action map[string]any
	// ToolCallID defaults to a fresh "call_…" id.
	ToolCallID string
	// LLMResponseID defaults to a fresh "chatcmpl-…" id; parallel calls share one.
	LLMResponseID string
	// Thought is the model's visible reasoning, if any.
	Thought string
	// SecurityRisk is UNKNOWN, LOW, MEDIUM or HIGH (default UNKNOWN).
	SecurityRisk string
	// Summary is the optional one-line summary.
	Summary string
}

// ActionEvent builds an ActionEvent from spec.
func ActionEvent(spec ActionSpec) Event {
	if spec.ToolName == "" {
		spec.ToolName = "terminal"
	}
	if spec.Action == nil {
		spec.Action = terminalAction("ls")
	}
	if spec.ToolCallID == "" {
		spec.ToolCallID = "call_" + strings.ReplaceAll(NewUUID(), "-", "")[:24]
	}
	if spec.LLMResponseID == "" {
		spec.LLMResponseID = "chatcmpl-" + strings.ReplaceAll(NewUUID(), "-", "")[:24]
	}
	if spec.SecurityRisk == "" {
		spec.SecurityRisk = "UNKNOWN"
	}
	thought := []any{}
	if spec.Thought != "" {
		thought = append(thought, textContent(spec.Thought))
	}
	ev := Event{
		"kind":            KindActionEvent,
		"source":          "agent",
		"thought":         thought,
		"thinking_blocks": []any{},
		"action":          spec.Action,
		"tool_name":       spec.ToolName,
		"tool_call_id":    spec.ToolCallID,
		"tool_call": map[string]any{
			"id":        spec.ToolCallID,
			"name":      spec.ToolName,
			"arguments": toolArguments(spec.Action),
			"origin":    "completion",
		},
		"llm_response_id": spec.LLMResponseID,
		"security_risk":   spec.SecurityRisk,
	}
	if spec.Summary != "" {
		ev["summary"] = spec.Summary
	}
	return ev
}

// toolArguments renders the action's fields (minus `kind`) as the JSON
// string the LLM produced.
func toolArguments(action map[string]any) string {
	args := make(map[string]any, len(action))
	for k, v := range action {
		if k != "kind" {
			args[k] = v
		}
	}
	raw, err := marshalJSON(args)
	if err != nil {
		return "{}"
	}
	return string(raw)
}

func terminalAction(command string) map[string]any {
	return map[string]any{"kind": "TerminalAction", "command": command, "is_input": false, "reset": false}
}

// TerminalAction builds an ActionEvent for the `terminal` tool running command.
func TerminalAction(command string) Event {
	return ActionEvent(ActionSpec{ToolName: "terminal", Action: terminalAction(command)})
}

// FinishAction builds an ActionEvent for the built-in `finish` tool.
func FinishAction(message string) Event {
	return ActionEvent(ActionSpec{
		ToolName: "finish",
		Action:   map[string]any{"kind": "FinishAction", "message": message},
	})
}

// ObservationEvent builds the ObservationEvent answering action (an
// ActionEvent as returned by [Conversation.Append]) with output text.
func ObservationEvent(action Event, output string, isError bool) Event {
	toolName, _ := action["tool_name"].(string)
	observation := map[string]any{
		"kind":     observationKind(toolName),
		"content":  []any{textContent(output)},
		"is_error": isError,
	}
	if toolName == "terminal" {
		exitCode := 0
		if isError {
			exitCode = 1
		}
		command := ""
		if act, ok := action["action"].(map[string]any); ok {
			command, _ = act["command"].(string)
		}
		observation["command"] = command
		observation["exit_code"] = exitCode
		observation["timeout"] = false
		observation["metadata"] = map[string]any{
			"exit_code": exitCode, "pid": 42, "working_dir": "/workspace", "prefix": "", "suffix": "",
		}
	}
	return Event{
		"kind":             KindObservationEvent,
		"source":           "environment",
		"tool_name":        toolName,
		"tool_call_id":     action["tool_call_id"],
		"observation":      observation,
		"action_id":        action.ID(),
		"extended_content": []any{},
	}
}

// observationKind names the observation class a built-in tool returns.
func observationKind(toolName string) string {
	switch toolName {
	case "terminal":
		return "TerminalObservation"
	case "finish":
		return "FinishObservation"
	case "think":
		return "ThinkObservation"
	case "file_editor":
		return "FileEditorObservation"
	case "task_tracker":
		return "TaskTrackerObservation"
	default:
		return "MCPToolObservation"
	}
}

// UserRejectObservation builds the rejection of action. An empty reason gives
// the SDK default "User rejected the action".
func UserRejectObservation(action Event, reason string) Event {
	if reason == "" {
		reason = "User rejected the action"
	}
	return Event{
		"kind":             KindUserRejectObservation,
		"source":           "environment",
		"tool_name":        action["tool_name"],
		"tool_call_id":     action["tool_call_id"],
		"rejection_reason": reason,
		"rejection_source": "user",
		"action_id":        action.ID(),
	}
}

// Classification is the SDK's ErrorClassification.
type Classification struct {
	Kind       string // auth, quota, rate_limit, config, transient, agent_action, internal, unknown
	Retryable  bool
	UserAction string // none, retry, settings (default none)
}

func (c Classification) toMap() map[string]any {
	if c.Kind == "" {
		c.Kind = "unknown"
	}
	if c.UserAction == "" {
		c.UserAction = "none"
	}
	return map[string]any{"kind": c.Kind, "retryable": c.Retryable, "user_action": c.UserAction}
}

// AgentOutcome is the classification of an agent-correctable failure.
var AgentOutcome = Classification{Kind: "agent_action", Retryable: true, UserAction: "retry"}

// AgentErrorEvent builds an AgentErrorEvent for action's tool call. A zero
// classification gives the SDK's auto-filled {kind: unknown, retryable: false}.
func AgentErrorEvent(action Event, message string, classification Classification) Event {
	return Event{
		"kind":           KindAgentErrorEvent,
		"source":         "agent",
		"tool_name":      action["tool_name"],
		"tool_call_id":   action["tool_call_id"],
		"error":          message,
		"classification": classification.toMap(),
	}
}

// ConversationErrorEvent builds a ConversationErrorEvent (source environment,
// as the server emits it), e.g. code "MaxIterationsReached".
func ConversationErrorEvent(code, detail string, classification Classification) Event {
	return Event{
		"kind":           KindConversationErrorEvent,
		"source":         "environment",
		"code":           code,
		"detail":         detail,
		"classification": classification.toMap(),
	}
}

// StreamingDeltaEvent builds a token delta (published, never persisted).
func StreamingDeltaEvent(content string) Event {
	return Event{"kind": KindStreamingDeltaEvent, "source": "agent", "content": content}
}

// TokenEvent builds a vLLM TokenEvent.
func TokenEvent(promptTokenIDs, responseTokenIDs []int) Event {
	return Event{
		"kind":               KindTokenEvent,
		"source":             "agent",
		"prompt_token_ids":   intsToAny(promptTokenIDs),
		"response_token_ids": intsToAny(responseTokenIDs),
	}
}

func intsToAny(ints []int) []any {
	out := make([]any, len(ints))
	for i, v := range ints {
		out[i] = json.Number(strconv.Itoa(v))
	}
	return out
}

// Condensation builds a Condensation forgetting the given event ids.
func Condensation(forgottenEventIDs []string, summary string) Event {
	ids := make([]any, len(forgottenEventIDs))
	for i, id := range forgottenEventIDs {
		ids[i] = id
	}
	ev := Event{
		"kind":                KindCondensation,
		"source":              "environment",
		"forgotten_event_ids": ids,
		"llm_response_id":     "chatcmpl-" + strings.ReplaceAll(NewUUID(), "-", "")[:24],
	}
	if summary != "" {
		ev["summary"] = summary
		ev["summary_offset"] = json.Number("0")
	}
	return ev
}

// StateUpdateEvent builds a per-field ConversationStateUpdateEvent. A nil
// value leaves `value` out entirely, as exclude_none does.
func StateUpdateEvent(key string, value any) Event {
	ev := Event{"kind": KindConversationStateUpdateEvent, "source": "environment", "key": key}
	if value != nil {
		ev["value"] = value
	}
	return ev
}

// PauseEvent builds the PauseEvent a pause emits.
func PauseEvent() Event { return Event{"kind": KindPauseEvent, "source": "user"} }

// InterruptEvent builds the InterruptEvent an interrupt emits.
func InterruptEvent() Event { return Event{"kind": KindInterruptEvent, "source": "user"} }
