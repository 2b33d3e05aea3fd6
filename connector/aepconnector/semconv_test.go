package aepconnector

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/vendorexport"
)

var latestNames = []string{"gen_ai.invoke_agent.duration", "gen_ai.execute_tool.duration",
	"gen_ai.invoke_agent.tool_calls", "gen_ai.invoke_agent.inference_calls"}

// runWithCalls is a run of 10 s with two tool calls (one redelivered) and
// three events in two steps.
func runWithCalls() []*aep.Event {
	at := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	ev := func(typ, callID string, d time.Duration, step string) *aep.Event {
		e := toolEvent(typ, "r", callID, at.Add(d))
		e.ID += "-" + d.String()
		e.Step = step
		if callID == "" {
			e.Data = map[string]any{}
		}
		return e
	}
	return []*aep.Event{
		ev("run.started", "", 0, ""),
		ev("tool.requested", "1", time.Second, "step-1"),
		ev("tool.requested", "2", time.Second, "step-1"),
		ev("tool.requested", "2", time.Second, "step-1"),
		ev("tool.completed", "1", 3*time.Second, ""),
		ev("tool.failed", "2", 4*time.Second, ""),
		ev("x.a.message", "", 5*time.Second, "step-2"),
		ev("run.finished", "", 10*time.Second, ""),
	}
}

// TestLatestGenAIMetrics: the current conventions' agent metrics appear
// beside today's names only when OTEL_SEMCONV_STABILITY_OPT_IN lists
// gen_ai_latest_experimental, and the variable is read when the connector
// is created.
func TestLatestGenAIMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		latest    bool
	}{
		{"unset", "", false},
		{"another category", "http", false},
		{"a longer name", "gen_ai_latest_experimental_v2", false},
		{"alone", "gen_ai_latest_experimental", true},
		{"in a list", "http/dup, gen_ai_latest_experimental", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(semconvOptInEnv, tc.env)
			h := newHarness(t, nil)
			t.Setenv(semconvOptInEnv, "") // read once, at creation
			h.feed(t, runWithCalls()...)
			got := renderMetrics(h.points.AllMetrics())
			assert.Contains(t, got, "gen_ai.client.operation.duration{", "today's names stay")
			for _, name := range latestNames {
				assert.Equal(t, tc.latest, strings.Contains(got, name+"{"), name)
			}
			if !tc.latest {
				return
			}
			for _, want := range []string{
				"gen_ai.invoke_agent.duration{aep.outcome=finished gen_ai.agent.name=a gen_ai.operation.name=invoke_agent} s count=1 sum=10",
				"gen_ai.invoke_agent.tool_calls{gen_ai.agent.name=a gen_ai.operation.name=invoke_agent} {tool_call} count=1 sum=2",
				"gen_ai.invoke_agent.inference_calls{gen_ai.agent.name=a gen_ai.operation.name=invoke_agent} {inference_call} count=1 sum=2",
				"gen_ai.execute_tool.duration{aep.outcome=completed gen_ai.agent.name=a gen_ai.operation.name=execute_tool gen_ai.tool.name=bash} s count=1 sum=2",
				"gen_ai.execute_tool.duration{aep.outcome=failed error.type=_OTHER gen_ai.agent.name=a gen_ai.operation.name=execute_tool gen_ai.tool.name=bash} s count=1 sum=3",
			} {
				assert.Contains(t, got, want)
			}
			assert.Equal(t, callBounds, histogramBounds(h.points.AllMetrics(), "gen_ai.invoke_agent.tool_calls"))
		})
	}
}

// TestLatestGenAIMetricsGolden pins the current conventions' metrics over
// the golden corpus: counts only for runs whose run.started was seen,
// inference calls only where the emitter stamps steps.
func TestLatestGenAIMetricsGolden(t *testing.T) {
	t.Setenv(semconvOptInEnv, semconvGenAILatest)
	h := newHarness(t, nil)
	h.feed(t, goldenEvents(t)...)
	var latest []string
	for line := range strings.SplitSeq(renderMetrics(h.points.AllMetrics()), "\n") {
		for _, name := range latestNames {
			if strings.HasPrefix(line, name+"{") {
				latest = append(latest, line)
			}
		}
	}
	requirePinned(t, "golden_metrics_latest.txt", strings.Join(latest, "\n")+"\n")
}

// TestNoSessionOnMetrics fails if any metric point or its resource carries
// a session (conversation) id, by name or by value: a series per
// conversation would grow without bound. Every source the connector
// serves, with the latest conventions on.
func TestNoSessionOnMetrics(t *testing.T) {
	t.Setenv(semconvOptInEnv, semconvGenAILatest)
	h := newHarness(t, nil)
	batches := []plog.Logs{
		logsOf(t, goldenEvents(t)...),
		logsOf(t, runWithCalls()...),
		inbound(t, vendorexport.Codex(0, "codex.conversation_starts", "codex.tool_result", "codex.tool_decision"), vendorexport.VSCode()),
	}
	sessions := map[string]bool{}
	for _, ld := range batches {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					if ev, err := projection.FromLogRecord(lr, rl.Resource()); err == nil && ev.Session != "" {
						sessions[ev.Session] = true
					}
				}
			}
		}
		require.NoError(t, h.metrics.ConsumeLogs(context.Background(), ld))
	}
	require.NotEmpty(t, sessions)
	points := 0
	check := func(where string, attrs pcommon.Map) {
		for k, v := range attrs.All() {
			if k == attrConversationID || k == attrSessionID || strings.Contains(k, "session") || sessions[v.AsString()] {
				t.Errorf("%s carries %s=%s", where, k, v.AsString())
			}
		}
	}
	for _, md := range h.points.AllMetrics() {
		for _, rm := range md.ResourceMetrics().All() {
			check("resource", rm.Resource().Attributes())
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					forEachPointAttrs(m, func(attrs pcommon.Map) {
						points++
						check(m.Name(), attrs)
					})
				}
			}
		}
	}
	assert.Positive(t, points)
}

func forEachPointAttrs(m pmetric.Metric, f func(pcommon.Map)) {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		for _, dp := range m.Sum().DataPoints().All() {
			f(dp.Attributes())
		}
	case pmetric.MetricTypeHistogram:
		for _, dp := range m.Histogram().DataPoints().All() {
			f(dp.Attributes())
		}
	default:
		panic("unexpected metric type " + m.Type().String())
	}
}

func histogramBounds(all []pmetric.Metrics, name string) []float64 {
	for _, md := range all {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() == name {
						return m.Histogram().DataPoints().At(0).ExplicitBounds().AsRaw()
					}
				}
			}
		}
	}
	return nil
}
