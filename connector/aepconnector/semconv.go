package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"os"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
)

// The GenAI conventions' transition plan: instrumentations keep the names
// they emitted until the operator opts in to the latest experimental ones
// through this variable, a comma-separated list.
const (
	semconvOptInEnv    = "OTEL_SEMCONV_STABILITY_OPT_IN"
	semconvGenAILatest = "gen_ai_latest_experimental"
)

// latestGenAIOptedIn reports whether OTEL_SEMCONV_STABILITY_OPT_IN lists
// gen_ai_latest_experimental. Read once, when the connector is created.
func latestGenAIOptedIn() bool {
	for v := range strings.SplitSeq(os.Getenv(semconvOptInEnv), ",") {
		if strings.TrimSpace(v) == semconvGenAILatest {
			return true
		}
	}
	return false
}

// callBounds are the conventions' advice for per-invocation call counts.
var callBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128}

// The agent metrics of the current GenAI conventions (README "Metrics"),
// emitted beside today's names when opted in.
var (
	metricInvokeAgentDuration = &metricDef{"gen_ai.invoke_agent.duration",
		"End-to-end duration of agent runs, from run.started to its terminal.", "s", durationBounds}
	metricExecuteToolDuration = &metricDef{"gen_ai.execute_tool.duration",
		"Duration of single tool executions, the execute_tool spans' durations.", "s", durationBounds}
	metricInvokeAgentToolCalls = &metricDef{"gen_ai.invoke_agent.tool_calls",
		"Tool calls an agent run made, failed and denied ones included.", "{tool_call}", callBounds}
	metricInvokeAgentInferenceCalls = &metricDef{"gen_ai.invoke_agent.inference_calls",
		"Model calls an agent run made: the distinct steps (model responses) its events carry.", "{inference_call}", callBounds}
)

// recordLatest records an ended operation in the current conventions'
// agent metrics. Durations need a known start, as today's do; the call
// counts need the run's start seen by this connector (callCounts).
func recordLatest(o *operation, record recordFunc) {
	ev := o.terminal
	seconds := o.end.Sub(o.start).Seconds()
	switch o.pos.Kind {
	case runtrace.KindTool:
		if o.startKnown {
			record(metricExecuteToolDuration, ev.Agent, seconds, label{attrOperationName, operationExecuteTool},
				label{attrToolName, o.toolName()}, label{attrOutcome, o.outcome()}, label{attrErrorType, o.errorType()})
		}
	case runtrace.KindRun:
		if o.startKnown {
			record(metricInvokeAgentDuration, ev.Agent, seconds, label{attrOperationName, operationInvokeAgent},
				label{attrOutcome, o.outcome()}, label{attrErrorType, o.errorType()})
		}
		if n, ok := o.calls.toolCalls(); ok {
			record(metricInvokeAgentToolCalls, ev.Agent, float64(n), label{attrOperationName, operationInvokeAgent})
		}
		if n, ok := o.calls.inferenceCalls(); ok {
			record(metricInvokeAgentInferenceCalls, ev.Agent, float64(n), label{attrOperationName, operationInvokeAgent})
		}
	}
}
