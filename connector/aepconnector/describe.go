package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"slices"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
)

// Attribute names: the OpenTelemetry GenAI semantic conventions where they
// have a name for the fact, aep.* (the projection's namespace) elsewhere.
const (
	attrOperationName  = "gen_ai.operation.name"
	attrAgentName      = "gen_ai.agent.name"
	attrConversationID = "gen_ai.conversation.id"
	attrSessionID      = "session.id"
	attrToolName       = "gen_ai.tool.name"
	attrToolCallID     = "gen_ai.tool.call.id"
	attrTokenType      = "gen_ai.token.type"
	attrInputTokens    = "gen_ai.usage.input_tokens"
	attrOutputTokens   = "gen_ai.usage.output_tokens"
	attrCachedTokens   = "gen_ai.usage.cache_read.input_tokens"
	attrRequestModel   = "gen_ai.request.model"
	attrErrorType      = "error.type"
	attrOutcome        = "aep.outcome"
	attrRunID          = "aep.run_id"
	attrSource         = "aep.source"
	attrEventID        = "aep.event_id"
	attrAttentionKind  = "aep.attention.kind"
	attrDeniedBy       = "aep.tool.denied_by"
	attrCostCurrency   = "aep.cost.currency"
	attrCostPrefix     = "aep.cost."
	attrStartUnknown   = "aep.start_unknown"
	attrType           = "aep.type"
	attrSeverity       = "aep.severity"
	attrErrorCode      = "aep.error.code"

	operationInvokeAgent = "invoke_agent"
	operationExecuteTool = "execute_tool"
	operationAttention   = "await_attention"

	// otherErrorType is the semantic conventions' fallback error.type.
	otherErrorType = "_OTHER"

	// currencyUSD is the currency of prices: US dollars, as litellm, which
	// prices the openhands receiver's runs, has them.
	currencyUSD = "USD"
)

// modelCallOperations are the GenAI conventions' operations of one model
// call (an inference).
var modelCallOperations = []string{"chat", "text_completion", "generate_content"}

// modelCall reports whether ev is the record of one model call, and its
// operation: data names one of modelCallOperations in
// gen_ai.operation.name (the VS Code agent's inference records, Codex's
// completed responses through the aepinbound processor). Run events never
// are: a run's usage is its terminal's.
func modelCall(ev *aep.Event) (string, bool) {
	op, _ := ev.Data[attrOperationName].(string)
	if strings.HasPrefix(ev.Type, "run.") || !slices.Contains(modelCallOperations, op) {
		return "", false
	}
	return op, true
}

// costParts are the cost object's numeric fields (AEP-0002 §5.2).
var costParts = []string{"total", "prompt", "completion", "cache", "reasoning"}

// operationName is gen_ai.operation.name of the operation's span.
func (o *operation) operationName() string {
	switch o.pos.Kind {
	case runtrace.KindTool:
		return operationExecuteTool
	case runtrace.KindAttention:
		return operationAttention
	default:
		return operationInvokeAgent
	}
}

// spanName follows the GenAI conventions: "{operation} {target}".
func (o *operation) spanName() string {
	switch o.pos.Kind {
	case runtrace.KindTool:
		return operationExecuteTool + " " + o.toolName()
	case runtrace.KindAttention:
		if o.attentionKind != "" {
			return operationAttention + " " + o.attentionKind
		}
		return operationAttention
	default:
		return operationInvokeAgent + " " + o.terminal.Agent
	}
}

// outcome says how the operation ended: finished, failed or cancelled for
// a run; completed, failed or denied for a tool call; the resolution or
// timeout for an attention wait.
func (o *operation) outcome() string {
	if o.unanswered {
		return "unanswered"
	}
	ev := o.terminal
	switch ev.Type {
	case "attention.resolved":
		if r, ok := ev.Data["resolution"].(string); ok {
			return r
		}
		return "resolved"
	case "attention.timeout":
		return "timeout"
	}
	_, verb, _ := strings.Cut(ev.Type, ".")
	return verb
}

// errorType is error.type of a failed operation, "" otherwise.
func (o *operation) errorType() string {
	ev := o.terminal
	if ev.Type != "run.failed" && ev.Type != "tool.failed" {
		return ""
	}
	if info, ok := ev.Data["error"].(map[string]any); ok {
		if t, ok := info["type"].(string); ok && t != "" {
			return t
		}
	}
	if r, ok := ev.Data["reason"].(string); ok && r != "" {
		return r
	}
	return otherErrorType
}

func (o *operation) toolName() string {
	name, _ := toolRef(o.terminal)
	return name
}

// toolRef reads data.tool {name, call_id}; the subject names the tool when
// the payload is gone (capture none).
func toolRef(ev *aep.Event) (name, callID string) {
	if tool, ok := ev.Data["tool"].(map[string]any); ok {
		name, _ = tool["name"].(string)
		callID, _ = tool["call_id"].(string)
	}
	if name == "" {
		name = ev.Subject
	}
	return name, callID
}

// tokens reads a gen_ai.usage.* count the event reports.
func tokens(ev *aep.Event, attr string) (int64, bool) {
	n, ok := number(ev.Data[attr])
	if !ok || n < 0 {
		return 0, false
	}
	return int64(n), true
}

// reportedCost reads the cost object: its currency and each numeric part
// present.
func reportedCost(ev *aep.Event) (currency string, parts map[string]float64) {
	c, ok := ev.Data["cost"].(map[string]any)
	if !ok {
		return "", nil
	}
	currency, _ = c["currency"].(string)
	if currency == "" {
		return "", nil // the schema requires it; a cost without one means nothing
	}
	parts = make(map[string]float64, len(costParts))
	for _, p := range costParts {
		if v, ok := number(c[p]); ok {
			parts[p] = v
		}
	}
	return currency, parts
}
