package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

// Attribute names: the OpenTelemetry GenAI semantic conventions where they
// have a name for the fact, aep.* (the projection's namespace) elsewhere.
const (
	attrOperationName  = usage.AttrOperationName
	attrAgentName      = "gen_ai.agent.name"
	attrConversationID = "gen_ai.conversation.id"
	attrSessionID      = "session.id"
	attrToolName       = "gen_ai.tool.name"
	attrToolCallID     = "gen_ai.tool.call.id"
	attrTokenType      = "gen_ai.token.type"
	attrInputTokens    = usage.AttrInputTokens
	attrOutputTokens   = usage.AttrOutputTokens
	attrCachedTokens   = usage.AttrCachedTokens
	attrRequestModel   = usage.AttrRequestModel
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
)

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
