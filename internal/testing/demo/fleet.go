package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrysink"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/vendorexport"
)

const (
	// emitterToken is the bearer token the aep receiver asks emitters for.
	emitterToken = "demo-emitter-token"
	// emitterSession is the AEP emitter's session (a Claude Code hook
	// adapter, say, on a developer's laptop).
	emitterSession = "cc-7f3a"
	emitterSource  = "aep://laptop-7/agent/claude-code/session/" + emitterSession
)

// codexNames are the records of the Codex export: one process, two
// conversations (the records alternate between them), three tool results,
// a denial by the configured policy and a completed model response with its
// token usage in each conversation.
var codexNames = []string{"codex.conversation_starts", "codex.conversation_starts",
	"codex.tool_result", "codex.tool_result", "codex.tool_result", "codex.tool_decision",
	"codex.sse_event", "codex.sse_event"}

// fleetSpans are the spans the fleet scenario makes: the OpenHands
// scenario's, the emitter's run and tool call, Codex's four tool calls and
// VS Code's two (no runs).
const fleetSpans = scenarioSpans + 2 + 4 + 2

// fleetAgents are the agents of the fleet scenario, each of which reports
// tokens and cost: OpenHands and the emitter per run, Codex per response,
// VS Code per inference.
var fleetAgents = []string{"claude-code", "codex", "openhands", "vscode"}

// runFleet is `make demo-fleet`: next to the OpenHands conversation of the
// watch scenario, a Codex process and the VS Code extension export their
// own OTel logs to the collector's otlp receiver (mapped to AEP by the
// aepinbound processor) and an AEP emitter POSTs a session to the aep
// receiver. Everything reaches one relay over the default WebSocket
// transport, a link per agent (the relay checks each event's agent against
// its link's hello); the aep connector makes one waterfall per session and
// one cost table (Codex's and VS Code's cost at the connector's prices). The
// collector runs with the current GenAI conventions' metrics opted in.
func runFleet(ctx context.Context, collectorBin, config string) (err error) {
	f, err := startFixtures(true)
	if err != nil {
		return err
	}
	defer f.Close()
	agents, relay, traces := f.agents, f.relay, f.traces
	var prometheus, otlp, emitters string
	for _, addr := range []*string{&prometheus, &otlp, &emitters} {
		if *addr, err = childproc.FreeAddr(); err != nil {
			return err
		}
	}
	conv, err := agents.CreateConversation(oh.ConversationOptions{Title: "Fix the failing test"})
	if err != nil {
		return err
	}
	say("agent server %s, relay %s, conversation %s; otlp receiver %s, aep receiver %s",
		agents.URL(), relay.URL(), conv.ID(), otlp, emitters)
	col, err := startCollector(collectorBin, config, agents.URL(), relay.URL(), traces.URL(), prometheus,
		"DEMO_OTLP="+otlp, "DEMO_AEP="+emitters, "DEMO_AEP_TOKEN="+emitterToken,
		"OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental")
	if err != nil {
		return err
	}
	defer col.finish(&err)
	say("collector log: %s", col.logPath)
	watch := &relayWatch{ctx: ctx, relay: relay, col: col}
	if err := watch.waitFor("the collector to attach", watch.seen(conv.ID(), "state.snapshot")); err != nil {
		return err
	}

	say("codex: one process, two conversations, exports its own OTel logs (OTLP/HTTP protobuf)")
	export, contentType, err := vendorexport.HTTPBody(vendorexport.Codex(0, codexNames...), false)
	if err != nil {
		return err
	}
	if err := post(ctx, "http://"+otlp+"/v1/logs", export, http.StatusOK, "Content-Type", contentType); err != nil {
		return fmt.Errorf("codex export: %w", err)
	}
	say("vs code: the Copilot Chat extension exports its own OTel logs (OTLP/HTTP JSON)")
	export, contentType, err = vendorexport.HTTPBody(vendorexport.VSCode(), true)
	if err != nil {
		return err
	}
	if err := post(ctx, "http://"+otlp+"/v1/logs", export, http.StatusOK, "Content-Type", contentType); err != nil {
		return fmt.Errorf("vs code export: %w", err)
	}
	say("an AEP emitter (claude-code) POSTs a session with one run to the aep receiver")
	batch, err := emitterBatch(time.Now())
	if err != nil {
		return err
	}
	if err := post(ctx, "http://"+emitters+"/events", batch, http.StatusAccepted, "Content-Type", "application/x-ndjson",
		"AEP-Version", aep.Version, "Authorization", "Bearer "+emitterToken); err != nil {
		return fmt.Errorf("emitter POST: %w", err)
	}
	say("openhands: " + scenarioStory)
	if err := playScenario(agents, conv, watch); err != nil {
		return err
	}
	for _, w := range []struct{ session, typ string }{
		{conv.ID(), "run.finished"}, {emitterSession, "run.finished"}, {"019a-conv-b", "x.codex.otel.sse_event"},
		{"vsc-window-1", "tool.failed"},
	} {
		if err := watch.waitFor(w.session+" "+w.typ, watch.seen(w.session, w.typ)); err != nil {
			return err
		}
	}
	if err := showFleet(ctx, os.Stdout, traces, "http://"+prometheus+"/metrics"); err != nil {
		return err
	}
	events, violations := relay.Events(), relay.Violations()
	say("%d AEP events from %d agents reached the relay, each agent on a WebSocket link of its own; %d protocol or stream violations",
		len(events), len(eventAgents(events)), len(violations))
	for _, v := range violations {
		say("violation: %s", v)
	}
	if len(violations) > 0 {
		return errors.New("the relay saw violations")
	}
	for _, r := range events {
		if r.Binding != aeprelaytest.BindingSocket {
			return fmt.Errorf("%s %s of agent %s reached the relay by %s, not on the WebSocket transport", r.Event.Type, r.Event.ID, r.Event.Agent, r.Binding)
		}
	}
	return nil
}

// emitterBatch is the emitter's NDJSON batch: a session with one run of
// one tool call, its usage and cost on the run's terminal, ending just
// before now.
func emitterBatch(now time.Time) ([]byte, error) {
	start := now.Add(-12 * time.Second)
	tool := map[string]any{"name": "Bash", "call_id": "toolu_01"}
	events := []struct {
		typ, run string
		at       time.Duration
		data     map[string]any
	}{
		{"session.started", "", 0, map[string]any{"client": map[string]any{"name": "claude-code"}}},
		{"run.started", "run-1", time.Second, nil},
		{"tool.requested", "run-1", 3 * time.Second, map[string]any{"tool": tool}},
		{"tool.completed", "run-1", 5400 * time.Millisecond, map[string]any{"tool": tool, "duration_ms": 2400}},
		{"run.finished", "run-1", 10 * time.Second, map[string]any{"duration_ms": 9000,
			"gen_ai.usage.input_tokens": 12840, "gen_ai.usage.output_tokens": 1210,
			"cost": map[string]any{"currency": "USD", "total": 0.0567}}},
	}
	var b bytes.Buffer
	for i, e := range events {
		ev := aep.Event{
			AEP: aep.Version, ID: fmt.Sprintf("%s-%d", emitterSession, i), Type: e.typ,
			Time: start.Add(e.at).UTC().Format(time.RFC3339Nano), Source: emitterSource,
			Agent: "claude-code", Session: emitterSession, Run: e.run, Seq: aep.Int64(int64(i)), Data: e.data,
		}
		line, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("emitter event %d: %w", i, err)
		}
		b.Write(append(line, '\n'))
	}
	return b.Bytes(), nil
}

// post sends body with the header pairs given, retrying while the listener
// is not up yet, until the answer is want.
func post(ctx context.Context, url string, body []byte, want int, header ...string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
			return fmt.Errorf("%s: %s %s", url, resp.Status, answer)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", url, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// showFleet waits for every source's spans and scraped figures, then
// prints one waterfall per session and one cost table per agent.
func showFleet(ctx context.Context, w io.Writer, traces *telemetrysink.Traces, metricsURL string) error {
	spans, samples, err := awaitTelemetry(ctx, traces, metricsURL, fmt.Sprintf("%d spans and every agent's figures", fleetSpans),
		func(spans []ptrace.Span, samples telemetrysink.Samples) bool {
			for _, agent := range fleetAgents {
				if _, costed := samples.Sum("aep_run_cost_total", "gen_ai_agent_name", agent); !costed {
					return false
				}
			}
			_, latest := samples.Sum("gen_ai_invoke_agent_duration_seconds_count")
			return len(spans) >= fleetSpans && latest && toolCalls(samples, "codex") == 4 && toolCalls(samples, "vscode") == 2
		})
	if err != nil {
		return err
	}
	writeWaterfall(w, spans)
	writeCostTable(w, samples, fleetAgents)
	runs, _ := samples.Sum("gen_ai_invoke_agent_duration_seconds_count")
	timed, _ := samples.Sum("gen_ai_execute_tool_duration_seconds_count")
	perRun, _ := samples.Sum("gen_ai_invoke_agent_tool_calls_sum")
	fmt.Fprintf(w, "cost     | scraped from %s; opted in to the current GenAI conventions: "+
		"gen_ai.invoke_agent.duration over %g runs, gen_ai.execute_tool.duration over %g calls with a duration, "+
		"gen_ai.invoke_agent.tool_calls summing %g\n", metricsURL, runs, timed, perRun)
	return nil
}

// toolCalls counts an agent's tool calls by their terminal events: denied
// ones have no duration to count them by.
func toolCalls(samples telemetrysink.Samples, agent string) float64 {
	var n float64
	for _, typ := range []string{"tool.completed", "tool.failed", "tool.denied"} {
		v, _ := samples.Sum("aep_events_total", "aep_type", typ, "gen_ai_agent_name", agent)
		n += v
	}
	return n
}

// writeCostTable prints, per agent, its runs, model calls reported
// without a run, tool calls, tokens and cost as the prometheus exporter
// shows them; "-" where the agent reports none.
func writeCostTable(w io.Writer, samples telemetrysink.Samples, agents []string) {
	fmt.Fprintf(w, "cost     | %-12s %5s %12s %11s %13s %14s %12s\n", "agent", "runs", "model calls", "tool calls", "input tokens", "output tokens", "cost (USD)")
	for _, agent := range agents {
		figure := func(metric string, labels ...string) string {
			v, ok := samples.Sum(metric, append(labels, "gen_ai_agent_name", agent)...)
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%g", v)
		}
		fmt.Fprintf(w, "cost     | %-12s %5s %12s %11s %13s %14s %12s\n", agent,
			figure("gen_ai_client_operation_duration_seconds_count", "gen_ai_operation_name", "invoke_agent"),
			figure("gen_ai_client_token_usage_count", "gen_ai_operation_name", "chat", "gen_ai_token_type", "input"),
			fmt.Sprintf("%g", toolCalls(samples, agent)),
			figure("gen_ai_client_token_usage_sum", "gen_ai_token_type", "input"),
			figure("gen_ai_client_token_usage_sum", "gen_ai_token_type", "output"),
			figure("aep_run_cost_total", "aep_cost_currency", "USD"))
	}
}

func eventAgents(events []aeprelaytest.Record) []string {
	var agents []string
	for _, r := range events {
		if !slices.Contains(agents, r.Event.Agent) {
			agents = append(agents, r.Event.Agent)
		}
	}
	return agents
}
