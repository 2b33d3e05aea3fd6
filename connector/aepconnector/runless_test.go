package aepconnector

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/vendorexport"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"
)

// inbound runs exports through the aepinbound processor in primary mode,
// as a collector does behind its otlp receiver, and returns what the
// connector would see.
func inbound(t *testing.T, exports ...plog.Logs) plog.Logs {
	t.Helper()
	f := aepinboundprocessor.NewFactory()
	cfg := f.CreateDefaultConfig().(*aepinboundprocessor.Config)
	cfg.Mode = "primary"
	sink := new(consumertest.LogsSink)
	p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(f.Type()), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	for _, ld := range exports {
		require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	}
	out := plog.NewLogs()
	for _, ld := range sink.AllLogs() {
		ld.ResourceLogs().MoveAndAppendTo(out.ResourceLogs())
	}
	return out
}

// TestInboundSessionsSpans pins the spans of Codex and VS Code sessions
// as the aepinbound processor maps them: tool calls without runs, each the
// root of its own trace with the session on it, durations from the
// vendor's duration_ms, a policy denial as a zero-length span with an
// unknown start; session.started and the vendor-namespaced records make
// no span, and the record that is not an agent's is skipped. Codex's
// completed response and VS Code's inference record are model calls:
// their tokens, with their model, and their cost at the configured prices.
func TestInboundSessionsSpans(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Prices = usage.Prices{
		"gpt-5-codex": {Input: 1.25, CachedInput: ptr(0.125), Output: 10},
		"gpt-5.2":     {Input: 1.75, CachedInput: ptr(0.175), Output: 14},
	}
	h := newHarness(t, cfg)
	ld := inbound(t, vendorexport.Codex(0, "codex.conversation_starts", "codex.conversation_starts", "codex.tool_result", "codex.tool_decision",
		"codex.api_request", "codex.sse_event"),
		vendorexport.VSCode())
	require.NoError(t, h.traces.ConsumeLogs(context.Background(), ld))
	require.NoError(t, h.metrics.ConsumeLogs(context.Background(), ld))
	// Calls without a call id are keyed by their event id, which the
	// processor derives from a position in its start-time epoch.
	ids := regexp.MustCompile(`(trace |span=)[0-9a-f]+`)
	requirePinned(t, "inbound_spans.txt", ids.ReplaceAllString(renderSpans(h.allSpans()), "$1…"))
	requirePinned(t, "inbound_metrics.txt", renderMetrics(h.points.AllMetrics()))
}

// TestRunlessToolCallWithStart: a plain AEP emitter that reports
// tool.requested and its answer without a run gets one root span from the
// request to the answer, even when the answer carries no duration.
func TestRunlessToolCallWithStart(t *testing.T) {
	h := newHarness(t, nil)
	at := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	req, done := toolEvent("tool.requested", "", "c1", at), toolEvent("tool.completed", "", "c1", at.Add(1500*time.Millisecond))
	h.feed(t, req, done)
	spans := h.allSpans()
	require.Len(t, spans, 1)
	s := spans[0]
	assert.True(t, s.ParentSpanID().IsEmpty(), "a root")
	assert.Equal(t, 1500*time.Millisecond, s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime()))
	for _, key := range []string{attrSessionID, attrConversationID} {
		v, ok := s.Attributes().Get(key)
		assert.True(t, ok, key)
		assert.Equal(t, "s", v.Str(), key)
	}
	_, hasRun := s.Attributes().Get(attrRunID)
	assert.False(t, hasRun, "no run, no aep.run_id")
	for _, c := range []*core{h.traces.(*tracesConnector).core, h.metrics.(*metricsConnector).core} {
		assert.Zero(t, c.tracker.order.Len(), "nothing stays open")
	}
}

func ptr[T any](v T) *T { return &v }
