package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

// tracesConnector emits one span per ended operation, under the resource
// of the log records it came from.
type tracesConnector struct {
	component.StartFunc
	component.ShutdownFunc

	next    consumer.Traces
	core    *core
	lineage *lineage // touched only under core's lock, in consume
}

func (*tracesConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (c *tracesConnector) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	td := ptrace.NewTraces()
	spans := make(map[int]ptrace.SpanSlice)
	c.core.consume(ctx, ld, func(i int, ev *aep.Event, _ time.Time, ops []*operation) {
		c.lineage.note(ev)
		if len(ops) == 0 {
			return
		}
		ss, ok := spans[i]
		if !ok {
			rs := td.ResourceSpans().AppendEmpty()
			ld.ResourceLogs().At(i).Resource().CopyTo(rs.Resource())
			scope := rs.ScopeSpans().AppendEmpty()
			scope.Scope().SetName(scopeName)
			ss = scope.Spans()
			spans[i] = ss
		}
		for _, op := range ops {
			c.lineage.place(op)
			putSpan(ss.AppendEmpty(), op)
		}
	})
	if td.SpanCount() == 0 {
		return nil
	}
	return c.next.ConsumeTraces(ctx, td)
}

// putSpan writes the operation as a span: ids from runtrace, the GenAI
// names and attributes, error status with error.type on a failure, and the
// run's error.raised events as span events.
func putSpan(span ptrace.Span, o *operation) {
	ev := o.terminal
	span.SetTraceID(o.pos.TraceID)
	span.SetSpanID(o.pos.SpanID)
	if o.pos.ParentID != ([8]byte{}) { // a run has none unless delegated
		span.SetParentSpanID(o.pos.ParentID)
	}
	span.SetName(o.spanName())
	span.SetKind(ptrace.SpanKindInternal)
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(o.start))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(o.end))

	attrs := span.Attributes()
	attrs.PutStr(attrOperationName, o.operationName())
	attrs.PutStr(attrAgentName, ev.Agent)
	if ev.Session != "" {
		attrs.PutStr(attrConversationID, ev.Session)
		attrs.PutStr(attrSessionID, ev.Session)
	}
	if o.run != "" {
		attrs.PutStr(attrRunID, o.run)
	}
	attrs.PutStr(attrSource, ev.Source)
	attrs.PutStr(attrOutcome, o.outcome())
	if !o.startKnown {
		attrs.PutBool(attrStartUnknown, true)
	}
	switch o.pos.Kind {
	case runtrace.KindTool:
		name, callID := toolRef(ev)
		attrs.PutStr(attrToolName, name)
		if callID != "" {
			attrs.PutStr(attrToolCallID, callID)
		}
		if by, ok := ev.Data["by"].(string); ok && ev.Type == "tool.denied" {
			attrs.PutStr(attrDeniedBy, by)
		}
	case runtrace.KindAttention:
		if o.attentionKind != "" {
			attrs.PutStr(attrAttentionKind, o.attentionKind)
		}
	default:
		putUsage(attrs, ev)
	}
	if t := o.errorType(); t != "" {
		attrs.PutStr(attrErrorType, t)
		span.Status().SetCode(ptrace.StatusCodeError)
	}
	for _, e := range o.errors {
		putErrorEvent(span.Events().AppendEmpty(), e)
	}
}

// putUsage copies the run's token counts and cost onto the span.
func putUsage(attrs pcommon.Map, ev *aep.Event) {
	for _, attr := range []string{attrInputTokens, attrOutputTokens} {
		if n, ok := usage.Tokens(ev, attr); ok {
			attrs.PutInt(attr, n)
		}
	}
	currency, parts := usage.ReportedCost(ev)
	if currency == "" {
		return
	}
	attrs.PutStr(attrCostCurrency, currency)
	for _, p := range usage.CostParts {
		if v, ok := parts[p]; ok {
			attrs.PutDouble(attrCostPrefix+p, v)
		}
	}
}

// putErrorEvent records an error.raised as a span event.
func putErrorEvent(se ptrace.SpanEvent, e timedEvent) {
	se.SetName("error.raised")
	se.SetTimestamp(pcommon.NewTimestampFromTime(e.at))
	attrs := se.Attributes()
	attrs.PutStr(attrEventID, e.ev.ID)
	if info, ok := e.ev.Data["error"].(map[string]any); ok {
		if t, ok := info["type"].(string); ok && t != "" {
			attrs.PutStr(attrErrorType, t)
		}
	}
	if code, ok := e.ev.Data["code"].(string); ok && code != "" {
		attrs.PutStr(attrErrorCode, code)
	}
}
