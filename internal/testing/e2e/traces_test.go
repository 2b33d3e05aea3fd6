package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrysink"
)

// statsValue is the server's stats state field with one usage id.
func statsValue(prompt, completion int, cost float64) map[string]any {
	return map[string]any{"usage_to_metrics": map[string]any{"agent": map[string]any{
		"model_name": "openai/fake", "accumulated_cost": cost,
		"accumulated_token_usage": map[string]any{"model": "openai/fake", "prompt_tokens": prompt, "completion_tokens": completion},
	}}}
}

// vendorTime parses the stub's naive timestamps as the receiver does (UTC).
func vendorTime(t *testing.T, ev oh.Event) time.Time {
	t.Helper()
	ts, err := time.ParseInLocation("2006-01-02T15:04:05.999999", ev.Timestamp(), time.UTC)
	require.NoError(t, err)
	return ts
}

func spanDuration(s ptrace.Span) time.Duration {
	return s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime())
}

// TestRunAsTraceAndMetrics runs receiver → aep connector → an OTLP trace
// sink and the prometheus exporter over the scripted run, with the server's
// stats growing twice: the run is one trace (run → tool calls → the
// attention wait) whose durations are the vendor timestamps' differences,
// the failed call is the one error, the log records carry the spans' ids,
// and the scraped token and cost totals are the server's own stats.
func TestRunAsTraceAndMetrics(t *testing.T) {
	e := newEnv(t)
	traces, err := telemetrysink.StartTraces()
	require.NoError(t, err)
	t.Cleanup(func() { _ = traces.Close() })
	prom, err := childproc.FreeAddr()
	require.NoError(t, err)
	e.start(pipelineConfig{traces: traces.URL(), prometheus: prom})
	conv := e.newConversation()
	e.awaitLive(conv, 1)

	s := newScript(t, conv)
	s.play(0, 3) // message, running, the first call
	_, err = conv.SetState("stats", statsValue(1200, 80, 0.0042))
	require.NoError(t, err)
	s.play(3, 9) // its result, the confirmed call failing, the answer
	_, err = conv.SetState("stats", statsValue(2600, 310, 0.0113))
	require.NoError(t, err)
	s.play(9, 10) // finished

	var spans []ptrace.Span
	require.Eventually(t, func() bool { spans = traces.Spans(); return len(spans) >= 4 }, waitFor, tick,
		"run, two tool calls and the attention wait")
	require.Len(t, spans, 4)
	byName := make(map[string][]ptrace.Span)
	for _, sp := range spans {
		byName[sp.Name()] = append(byName[sp.Name()], sp)
	}
	require.Len(t, byName["invoke_agent openhands"], 1)
	require.Len(t, byName["execute_tool terminal"], 2)
	require.Len(t, byName["await_attention permission"], 1)
	run := byName["invoke_agent openhands"][0]
	assert.True(t, run.ParentSpanID().IsEmpty())
	for _, child := range spans {
		assert.Equal(t, run.TraceID(), child.TraceID(), child.Name())
		if child.SpanID() != run.SpanID() {
			assert.Equal(t, run.SpanID(), child.ParentSpanID(), child.Name())
		}
	}

	// Durations are the vendor timestamps' differences.
	vendor := conv.Events()
	var running, finished, waiting, resumed time.Time
	var actions []oh.Event
	observed := map[string]time.Time{}
	for _, ev := range vendor {
		switch ev.Kind() {
		case "ActionEvent":
			actions = append(actions, ev)
		case "ObservationEvent":
			observed[ev["tool_call_id"].(string)] = vendorTime(t, ev)
		case "ConversationStateUpdateEvent":
			if ev["key"] != "execution_status" {
				continue
			}
			switch ev["value"] {
			case oh.StatusRunning:
				if running.IsZero() {
					running = vendorTime(t, ev)
				} else {
					resumed = vendorTime(t, ev)
				}
			case oh.StatusWaitingForConfirmation:
				waiting = vendorTime(t, ev)
			case oh.StatusFinished:
				finished = vendorTime(t, ev)
			}
		}
	}
	require.Len(t, actions, 2)
	assert.Equal(t, finished.Sub(running).Milliseconds(), spanDuration(run).Milliseconds(), "run")
	assert.Equal(t, resumed.Sub(waiting).Milliseconds(), spanDuration(byName["await_attention permission"][0]).Milliseconds(), "attention")
	errors := 0
	for _, tool := range byName["execute_tool terminal"] {
		callID, ok := tool.Attributes().Get("gen_ai.tool.call.id")
		require.True(t, ok)
		var action oh.Event
		for _, a := range actions {
			if a["tool_call_id"] == callID.Str() {
				action = a
			}
		}
		require.NotNil(t, action, callID.Str())
		want := observed[callID.Str()].Sub(vendorTime(t, action))
		assert.Equal(t, want.Milliseconds(), spanDuration(tool).Milliseconds(), callID.Str())
		if tool.Status().Code() == ptrace.StatusCodeError {
			errors++
			errType, _ := tool.Attributes().Get("error.type")
			assert.Equal(t, "tool_error", errType.Str())
		}
	}
	assert.Equal(t, 1, errors, "one error status, where the tool failed")
	input, _ := run.Attributes().Get("gen_ai.usage.input_tokens")
	assert.Equal(t, int64(2600), input.Int())

	// The log records carry the ids of the spans they belong to.
	events := e.awaitOTLPTypes(conv, "state.delta", "run.finished")
	spanIDs := map[pcommon.SpanID]bool{}
	for _, sp := range spans {
		spanIDs[sp.SpanID()] = true
	}
	inRun := 0
	for _, r := range e.otlp.Records() {
		if r.Record.TraceID().IsEmpty() {
			continue
		}
		inRun++
		assert.Equal(t, run.TraceID(), r.Record.TraceID())
		assert.True(t, spanIDs[r.Record.SpanID()], "a record's span is one of the trace's")
	}
	assert.Equal(t, countRunEvents(events), inRun, "every event of the run carries the trace")

	// The scraped totals are the server's own stats.
	var samples telemetrysink.Samples
	require.Eventually(t, func() bool {
		samples, _ = telemetrysink.Scrape("http://" + prom + "/metrics")
		_, ok := samples.Sum("aep_run_cost_total")
		return ok
	}, waitFor, tick, "the prometheus exporter serves the run's cost")
	assert.Empty(t, traces.Refused())
	for _, tc := range []struct {
		metric string
		labels []string
		want   float64
	}{
		{"gen_ai_client_token_usage_sum", []string{"gen_ai_token_type", "input"}, 2600},
		{"gen_ai_client_token_usage_sum", []string{"gen_ai_token_type", "output"}, 310},
		{"aep_run_cost_total", []string{"aep_cost_currency", "USD"}, 0.0113},
		{"gen_ai_client_operation_duration_seconds_count", []string{"gen_ai_operation_name", "execute_tool"}, 2},
		{"aep_attention_wait_duration_seconds_count", nil, 1},
	} {
		got, ok := samples.Sum(tc.metric, tc.labels...)
		if assert.True(t, ok, "%s%v not scraped; have %v", tc.metric, tc.labels, keys(samples)) {
			assert.InDelta(t, tc.want, got, 1e-9, "%s%v", tc.metric, tc.labels)
		}
	}
}

func countRunEvents(evs []*aep.Event) int {
	n := 0
	for _, ev := range evs {
		if ev.Run != "" {
			n++
		}
	}
	return n
}

func keys(m telemetrysink.Samples) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
