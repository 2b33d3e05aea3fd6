package mapping

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Markers for model thought: they must never ride, at any level.
const (
	thoughtMarker   = "THOUGHT-MARKER"
	reasoningMarker = "REASONING-MARKER"
)

// secretInputs each carry the secret in their content; content says whether
// some annotated field may carry it above metadata.
func secretInputs(tb testing.TB) []struct {
	name    string
	fields  map[string]any
	content bool
} {
	tb.Helper()
	text := func(s string) []any { return []any{map[string]any{"type": "text", "text": s}} }
	return []struct {
		name    string
		fields  map[string]any
		content bool
	}{
		{"action", map[string]any{
			"kind": "ActionEvent", "source": "agent", "tool_name": "terminal", "tool_call_id": "c1",
			"action":  map[string]any{"kind": "TerminalAction", "command": "echo " + secret},
			"thought": text(thoughtMarker), "reasoning_content": reasoningMarker,
			"thinking_blocks": []any{map[string]any{"thinking": thoughtMarker}}, "summary": "s",
		}, true},
		{"observation_ok", map[string]any{
			"kind": "ObservationEvent", "tool_name": "terminal", "tool_call_id": "c1",
			"observation": map[string]any{"content": text("out " + secret), "is_error": false},
		}, true},
		{"observation_error", map[string]any{
			"kind": "ObservationEvent", "tool_name": "terminal", "tool_call_id": "c1",
			"observation": map[string]any{"content": text("err " + secret), "is_error": true},
		}, true},
		{"agent_error", map[string]any{
			"kind": "AgentErrorEvent", "tool_name": "terminal", "tool_call_id": "c1", "error": "crash " + secret,
		}, true},
		{"user_reject_user", map[string]any{
			"kind": "UserRejectObservation", "tool_name": "terminal", "rejection_reason": "no " + secret,
			"rejection_source": "user",
		}, true},
		// tool.denied has no content field: the reason never rides.
		{"user_reject_hook", map[string]any{
			"kind": "UserRejectObservation", "tool_name": "terminal", "rejection_reason": "hook " + secret,
			"rejection_source": "hook",
		}, false},
		{"message", map[string]any{
			"kind": "MessageEvent", "source": "agent", "llm_response_id": "r1", "activated_skills": []any{},
			"llm_message": map[string]any{
				"role": "assistant", "content": text("msg " + secret), "reasoning_content": reasoningMarker,
				"thinking_blocks": []any{map[string]any{"thinking": thoughtMarker}},
			},
		}, true},
		// session.compacted has no annotated summary field.
		{"condensation", map[string]any{
			"kind": "Condensation", "forgotten_event_ids": []any{"a"}, "summary": "sum " + secret,
		}, false},
		{"state_key", map[string]any{
			"kind": "ConversationStateUpdateEvent", "key": "agent_state", "value": map[string]any{"note": secret},
		}, true},
		{"state_full", map[string]any{
			"kind": "ConversationStateUpdateEvent", "key": "full_state",
			"value": map[string]any{"execution_status": "idle", "note": secret},
		}, true},
		{"conversation_error", map[string]any{
			"kind": "ConversationErrorEvent", "code": "Boom", "detail": "detail " + secret,
		}, true},
		{"system_prompt", map[string]any{
			"kind": "SystemPromptEvent", "system_prompt": map[string]any{"type": "text", "text": secret},
		}, true},
		{"unknown_kind", map[string]any{"kind": "SandboxCheckpointEvent", "anything": secret}, true},
	}
}

// TestCaptureLevels: above metadata, content rides only in annotated fields
// (down-levelling the event to metadata gives exactly the metadata event),
// through the redactor at redacted and verbatim at full; thought never rides.
func TestCaptureLevels(t *testing.T) {
	for _, in := range secretInputs(t) {
		in.fields["id"], in.fields["timestamp"] = "v1", vendorTS
		mapAt := func(t *testing.T, level aep.Capture) []*aep.Event {
			out := newConversation(t, testConfig(level, false)).Map(vendorEvent(t, in.fields), received)
			requireValid(t, out)
			return out
		}
		t.Run(in.name, func(t *testing.T) {
			metadata := mapAt(t, aep.CaptureMetadata)
			for _, ev := range metadata {
				assert.NotContains(t, marshal(t, ev), secret)
				assert.NotContains(t, marshal(t, ev), "[REDACTED")
			}
			for _, level := range []aep.Capture{aep.CaptureRedacted, aep.CaptureFull} {
				out := mapAt(t, level)
				require.Equal(t, types(metadata), types(out))
				var all strings.Builder
				for i, ev := range out {
					assert.Equal(t, level, ev.Capture)
					all.WriteString(marshal(t, ev))
					got := downlevelToMetadata(t, ev)
					if strings.HasPrefix(ev.Type, "x.") {
						got = aep.CloneValue(ev.Data).(map[string]any)
						delete(got, "payload")
					}
					assert.Equal(t, metadata[i].Data, got, "%s at %s: content outside annotated fields", ev.Type, level)
				}
				assert.NotContains(t, all.String(), thoughtMarker)
				assert.NotContains(t, all.String(), reasoningMarker)
				switch {
				case level == aep.CaptureRedacted:
					assert.NotContains(t, all.String(), secret)
					assert.Equal(t, in.content, strings.Contains(all.String(), secretMark), "content through the redactor")
				default:
					assert.Equal(t, in.content, strings.Contains(all.String(), secret), "content verbatim at full")
				}
			}
			for _, ev := range mapAt(t, aep.CaptureNone) {
				assert.Nil(t, ev.Data, "%s carries data at capture none", ev.Type)
			}
		})
	}
}

func TestContentFields(t *testing.T) {
	f := loadFixture(t)
	for _, tc := range []struct {
		name  string
		level aep.Capture
		field string
	}{
		{"action_event", aep.CaptureRedacted, "args_redacted"},
		{"action_event", aep.CaptureFull, "args"},
		{"observation_ok", aep.CaptureRedacted, "result_redacted"},
		{"observation_ok", aep.CaptureFull, "result"},
		{"state_full", aep.CaptureRedacted, "state"},
		{"state_key", aep.CaptureRedacted, "delta"},
		{"message_user", aep.CaptureRedacted, "payload"},
	} {
		t.Run(tc.name+"_"+string(tc.level), func(t *testing.T) {
			out := mapFixtureInput(t, testConfig(tc.level, false), f.Events[tc.name].Input)
			require.Len(t, out, 1)
			assert.Contains(t, out[0].Data, tc.field)
		})
	}
	t.Run("state_delta_patch", func(t *testing.T) {
		out := mapFixtureInput(t, testConfig(aep.CaptureFull, false), f.Events["state_key"].Input)
		assert.Equal(t, []any{map[string]any{"op": "replace", "path": "/execution_status", "value": StatusWaiting}},
			out[0].Data["delta"])
	})
	t.Run("state_delta_pointer_escaping_and_none", func(t *testing.T) {
		out := newConversation(t, testConfig(aep.CaptureFull, false)).Map(vendorEvent(t, map[string]any{
			"kind": "ConversationStateUpdateEvent", "id": "v1", "key": "a/b~c",
		}), received)
		assert.Equal(t, []any{map[string]any{"op": "replace", "path": "/a~1b~0c", "value": nil}}, out[0].Data["delta"])
	})
	t.Run("payload_without_envelope_fields", func(t *testing.T) {
		out := mapFixtureInput(t, testConfig(aep.CaptureFull, false), f.Fallback.Input)
		assert.Equal(t, map[string]any{"source": "environment", "anything": true}, out[0].Data["payload"])
	})
	t.Run("full_does_not_alias_the_input", func(t *testing.T) {
		ev, err := DecodeEvent(f.Events["action_event"].Input)
		require.NoError(t, err)
		out := newConversation(t, testConfig(aep.CaptureFull, false)).Map(ev, received)
		out[0].Data["args"].(map[string]any)["command"] = "changed"
		assert.Equal(t, "ls -la", ev.Fields["action"].(map[string]any)["command"])
	})
}

func TestCategoryOverride(t *testing.T) {
	cfg := testConfig(aep.CaptureMetadata, false)
	cfg.Ceiling.Categories = map[string]aep.Capture{"attention": aep.CaptureRedacted, "x": aep.CaptureNone}
	c := newConversation(t, cfg)
	out := feed(t, c, stateEvent(t, "s1", StatusRunning), action(t, "a1", "c1"), stateEvent(t, "s2", StatusWaiting), message(t, "m1", "user", "user"))
	requireValid(t, out)
	requested := findType(out, typeAttentionRequested)
	assert.Equal(t, aep.CaptureRedacted, requested.Capture)
	assert.Equal(t, waitingPrompt, requested.Data["prompt"])
	assert.Equal(t, aep.CaptureMetadata, findType(out, "tool.requested").Capture)
	assert.NotContains(t, findType(out, "tool.requested").Data, "args_redacted")
	vendor := findType(out, "x.openhands.message.event")
	assert.Equal(t, aep.CaptureNone, vendor.Capture)
	assert.Nil(t, vendor.Data)
}
