package vendormap

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

// TestCodexUsage: Codex's response.completed carries one response's token
// counts in its own names; the event carries them in AEP's usage fields and
// the GenAI conventions' names too, in both modes, the vendor's keys kept.
func TestCodexUsage(t *testing.T) {
	completed := func(attrs map[string]any) Record {
		base := map[string]any{"event.kind": "response.completed"}
		for k, v := range attrs {
			base[k] = v
		}
		return codexRecord("codex.sse_event", base)
	}
	usage := []string{attrOperationName, attrRequestModel, attrInputTokens, attrOutputTokens, attrCachedTokens, attrReasoningTokens}
	for _, tc := range []struct {
		name string
		rec  Record
		want map[string]any // the usage keys expected; nil: none of them
	}{
		{name: "counts as Display text, optional ones as integers",
			rec: completed(map[string]any{"input_token_count": "12840", "output_token_count": "1210",
				"cached_token_count": json.Number("11008"), "reasoning_token_count": json.Number("448"), "tool_token_count": "0"}),
			want: map[string]any{attrOperationName: "chat", attrRequestModel: "gpt-5-codex",
				attrInputTokens: json.Number("12840"), attrOutputTokens: json.Number("1210"),
				attrCachedTokens: json.Number("11008"), attrReasoningTokens: json.Number("448")}},
		{name: "no cached or reasoning count (None is not recorded)",
			rec: completed(map[string]any{"input_token_count": "90", "output_token_count": "7"}),
			want: map[string]any{attrOperationName: "chat", attrRequestModel: "gpt-5-codex",
				attrInputTokens: json.Number("90"), attrOutputTokens: json.Number("7")}},
		{name: "a part larger than its whole is cut to it",
			rec: completed(map[string]any{"input_token_count": "90", "output_token_count": "7",
				"cached_token_count": "500", "reasoning_token_count": "8"}),
			want: map[string]any{attrOperationName: "chat", attrRequestModel: "gpt-5-codex",
				attrInputTokens: json.Number("90"), attrOutputTokens: json.Number("7"),
				attrCachedTokens: json.Number("90"), attrReasoningTokens: json.Number("7")}},
		{name: "the fixture's kind key",
			rec: codexRecord("codex.sse_event", map[string]any{"kind": "response.completed", "input_token_count": "3", "output_token_count": "4"}),
			want: map[string]any{attrOperationName: "chat", attrRequestModel: "gpt-5-codex",
				attrInputTokens: json.Number("3"), attrOutputTokens: json.Number("4")}},
		{name: "a negative count is no usage",
			rec: completed(map[string]any{"input_token_count": "-1", "output_token_count": "7"})},
		{name: "a missing output count is no usage",
			rec: completed(map[string]any{"input_token_count": "90"})},
		{name: "a count that is not a number is no usage",
			rec: completed(map[string]any{"input_token_count": "many", "output_token_count": "7"})},
		{name: "a failed completion carries no counts",
			rec: completed(map[string]any{"error.message": "stream closed"})},
		{name: "another kind is no usage",
			rec: codexRecord("codex.sse_event", map[string]any{"event.kind": "response.output_item.done", "input_token_count": "3", "output_token_count": "4"})},
		{name: "another record is no usage",
			rec: codexRecord("codex.api_request", map[string]any{"event.kind": "response.completed", "input_token_count": "3", "output_token_count": "4"})},
	} {
		for _, mode := range []Mode{ModeCompanion, ModePrimary} {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				got, ok := Map(Codex, tc.rec, Options{Mode: mode})
				require.True(t, ok)
				for _, k := range usage {
					if want, expected := tc.want[k]; expected {
						assert.Equal(t, want, got.Data[k], k)
					} else {
						assert.NotContains(t, got.Data, k)
					}
				}
				for k, v := range tc.rec.Attributes {
					if !profiles[Codex].envelope[k] && profiles[Codex].gated[k] == "" {
						assert.Equal(t, v, got.Data[k], "the vendor's %s rides as sent", k)
					}
				}
				require.NoError(t, schema.Validate(envelope(got)))
			})
		}
	}
	t.Run("none keeps no data, so no usage", func(t *testing.T) {
		got, ok := Map(Codex, completed(map[string]any{"input_token_count": "3", "output_token_count": "4"}),
			Options{Ceiling: aep.CaptureNone})
		require.True(t, ok)
		assert.Nil(t, got.Data)
	})
}
