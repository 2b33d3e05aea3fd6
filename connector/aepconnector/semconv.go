package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"os"
	"strings"
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

// recordCallCounts records a run's call counts, which need the run's start
// seen by this connector (callCounts).
func recordCallCounts(o *operation, record recordFunc) {
	if n, ok := o.calls.toolCalls(); ok {
		record(metricInvokeAgentToolCalls, o.terminal.Agent, float64(n), label{attrOperationName, operationInvokeAgent})
	}
	if n, ok := o.calls.inferenceCalls(); ok {
		record(metricInvokeAgentInferenceCalls, o.terminal.Agent, float64(n), label{attrOperationName, operationInvokeAgent})
	}
}
