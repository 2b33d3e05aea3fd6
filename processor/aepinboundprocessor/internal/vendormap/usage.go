package vendormap

import (
	"encoding/json"
	"strconv"
	"strings"
)

// The GenAI conventions' names for one model call's facts. AEP's usage
// fields are the first two (AEP-0002 §5.2); AEP has none for cached and
// reasoning tokens, so those take the conventions' names, never x.*. The
// projection carries every gen_ai.* data key as a log attribute, where the
// aep connector reads them.
const (
	attrOperationName   = "gen_ai.operation.name"
	attrInputTokens     = "gen_ai.usage.input_tokens"
	attrOutputTokens    = "gen_ai.usage.output_tokens"
	attrCachedTokens    = "gen_ai.usage.cache_read.input_tokens"
	attrReasoningTokens = "gen_ai.usage.reasoning.output_tokens"

	// operationChat is the conventions' operation of a chat model call.
	operationChat = "chat"
	// codexResponseCompleted is the kind of Codex's sse_event that closes
	// one model response and carries its token counts.
	codexResponseCompleted = "response.completed"
)

// putCodexUsage puts one model response's figures, in AEP's and the GenAI
// conventions' names, on the data of Codex's codex.sse_event of kind
// response.completed (session_telemetry.rs, sse_event_completed):
// input_token_count (cached tokens included, as the Responses API counts
// them), output_token_count (reasoning included), cached_token_count,
// reasoning_token_count, and the session's model. The vendor's own keys
// ride as sent beside them. Nothing is put unless both main counts read as
// non-negative integers: a half-read response is no usage.
func putCodexUsage(data map[string]any, attrs map[string]any) {
	if firstString(attrs, "event.kind", "kind") != codexResponseCompleted {
		return
	}
	input, okIn := countAttr(attrs, "input_token_count")
	output, okOut := countAttr(attrs, "output_token_count")
	if !okIn || !okOut {
		return
	}
	data[attrOperationName] = operationChat
	if model := stringAttr(attrs, attrModel); model != "" {
		data[attrRequestModel] = model
	}
	data[attrInputTokens] = count(input)
	data[attrOutputTokens] = count(output)
	if cached, ok := countAttr(attrs, "cached_token_count"); ok {
		data[attrCachedTokens] = count(min(cached, input))
	}
	if reasoning, ok := countAttr(attrs, "reasoning_token_count"); ok {
		data[attrReasoningTokens] = count(min(reasoning, output))
	}
}

// countAttr reads a non-negative integer sent as an integer, a double
// (rounded half up) or the text of either (Codex formats most fields with
// Display).
func countAttr(m map[string]any, key string) (int64, bool) {
	var text string
	switch v := m[key].(type) {
	case json.Number:
		text = string(v)
	case string:
		text = strings.TrimSpace(v)
	default:
		return 0, false
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil && n >= 0 {
		return n, true
	}
	if f, err := strconv.ParseFloat(text, 64); err == nil && f >= 0 && f < 1<<62 {
		return int64(f + 0.5), true
	}
	return 0, false
}

func count(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }
