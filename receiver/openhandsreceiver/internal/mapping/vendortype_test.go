package mapping

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVendorType(t *testing.T) {
	for _, tc := range []struct{ kind, want string }{
		// AEP brief §4.2 and the design record, pinned.
		{"MessageEvent", "x.openhands.message.event"},
		{"StreamingDeltaEvent", "x.openhands.streaming.delta"},
		{"CondensationRequest", "x.openhands.condensation.request"},
		{"CondensationSummaryEvent", "x.openhands.condensation.summary"},
		{"PauseEvent", "x.openhands.pause.event"},
		{"InterruptEvent", "x.openhands.interrupt.event"},
		{"SystemPromptEvent", "x.openhands.system.prompt"},
		{"ACPToolCallEvent", "x.openhands.acp_tool.call"},
		{"UserRejectObservation", "x.openhands.user_reject.observation"},
		{"SandboxCheckpointEvent", "x.openhands.sandbox.checkpoint"},
		{"LLMCompletionLogEvent", "x.openhands.llm_completion.log"},
		// Other members of the union.
		{"ConversationStateUpdateEvent", "x.openhands.conversation_state.update"},
		{"HookExecutionEvent", "x.openhands.hook.execution"},
		{"ServerErrorEvent", "x.openhands.server.error"},
		// Odd inputs: still a valid type.
		{"", "x.openhands.unknown.event"},
		{"!!!", "x.openhands.unknown.event"},
		{"Event", "x.openhands.event.event"},
		{"EventEvent", "x.openhands.event.event"},
		{"_Event", "x.openhands.event.event"},
		{"ABC", "x.openhands.abc.event"},
		{"HTTP2Request", "x.openhands.http2.request"},
		{"V2Event", "x.openhands.v2.event"},
		{"123", "x.openhands.123.event"},
		{"snake_case_event", "x.openhands.snake.case"},
		{"Dotted.Kind-Name", "x.openhands.dotted_kind.name"},
		{"Über Event", "x.openhands.ber.event"},
		{"A__B__", "x.openhands.a.b"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			got := VendorType(tc.kind)
			assert.Equal(t, tc.want, got)
			assert.Regexp(t, typeSyntax, got)
		})
	}
}
