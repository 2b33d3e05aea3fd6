package openhandstest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuilders(t *testing.T) {
	action := TerminalAction("ls -la")
	action["id"] = NewUUID()
	tests := []struct {
		name   string
		event  Event
		kind   string
		source string
		fields map[string]any // checked after a JSON round trip
	}{
		{name: "user message", event: MessageEvent("user", "hi"), kind: KindMessageEvent, source: "user",
			fields: map[string]any{"llm_message": map[string]any{"role": "user", "thinking_blocks": []any{},
				"content": []any{map[string]any{"type": "text", "text": "hi", "cache_prompt": false}}}}},
		{name: "terminal action", event: action, kind: KindActionEvent, source: "agent",
			fields: map[string]any{"tool_name": "terminal", "security_risk": "UNKNOWN",
				"action": map[string]any{"kind": "TerminalAction", "command": "ls -la", "is_input": false, "reset": false}}},
		{name: "finish action", event: FinishAction("done"), kind: KindActionEvent, source: "agent",
			fields: map[string]any{"tool_name": "finish", "action": map[string]any{"kind": "FinishAction", "message": "done"}}},
		{name: "observation", event: ObservationEvent(action, "total 0", true), kind: KindObservationEvent, source: "environment",
			fields: map[string]any{"action_id": action.ID(), "tool_call_id": action["tool_call_id"]}},
		{name: "user reject", event: UserRejectObservation(action, ""), kind: KindUserRejectObservation, source: "environment",
			fields: map[string]any{"rejection_reason": "User rejected the action", "rejection_source": "user", "action_id": action.ID()}},
		{name: "agent error", event: AgentErrorEvent(action, "boom", Classification{}), kind: KindAgentErrorEvent, source: "agent",
			fields: map[string]any{"error": "boom", "classification": map[string]any{"kind": "unknown", "retryable": false, "user_action": "none"}}},
		{name: "conversation error", event: ConversationErrorEvent("MaxIterationsReached", "limit", Classification{Kind: "agent_action"}),
			kind: KindConversationErrorEvent, source: "environment", fields: map[string]any{"code": "MaxIterationsReached"}},
		{name: "streaming delta", event: StreamingDeltaEvent("tok"), kind: KindStreamingDeltaEvent, source: "agent",
			fields: map[string]any{"content": "tok"}},
		{name: "token", event: TokenEvent([]int{1, 2}, []int{3}), kind: KindTokenEvent, source: "agent",
			fields: map[string]any{"prompt_token_ids": []any{1.0, 2.0}, "response_token_ids": []any{3.0}}},
		{name: "condensation", event: Condensation([]string{"a", "b"}, "sum"), kind: KindCondensation, source: "environment",
			fields: map[string]any{"forgotten_event_ids": []any{"a", "b"}, "summary": "sum", "summary_offset": 0.0}},
		{name: "state update with null value", event: StateUpdateEvent("title", nil), kind: KindConversationStateUpdateEvent,
			source: "environment", fields: map[string]any{"key": "title"}},
		{name: "pause", event: PauseEvent(), kind: KindPauseEvent, source: "user"},
		{name: "interrupt", event: InterruptEvent(), kind: KindInterruptEvent, source: "user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := marshalJSON(tt.event)
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, json.Unmarshal(raw, &got))
			assert.Equal(t, tt.kind, got["kind"])
			assert.Equal(t, tt.source, got["source"])
			assert.NotEmpty(t, KindFQN(tt.kind), "every built kind is searchable")
			for k, want := range tt.fields {
				assert.Equal(t, want, got[k], k)
			}
			for k, v := range got {
				assert.NotNil(t, v, "exclude_none: %s", k)
			}
		})
	}
	assert.NotContains(t, StateUpdateEvent("title", nil), "value")
}

func BenchmarkAppend(b *testing.B) {
	s, err := NewServer(Config{})
	require.NoError(b, err)
	defer s.Close()
	c, err := s.CreateConversation(ConversationOptions{})
	require.NoError(b, err)
	action := TerminalAction("ls -la")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Append(action); err != nil {
			b.Fatal(err)
		}
	}
}
