package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrysink"
)

// barWidth is the width of the waterfall's timeline column.
const barWidth = 40

// showRun waits for the run's trace (the root span and as many children as
// want) and its scraped totals, then prints the waterfall and the totals.
func showRun(ctx context.Context, w io.Writer, traces *telemetrysink.Traces, metricsURL string, want int) error {
	spans, samples, err := awaitTelemetry(ctx, traces, metricsURL, fmt.Sprintf("the run's %d spans and its cost metric", want),
		func(spans []ptrace.Span, samples telemetrysink.Samples) bool {
			_, costed := samples.Sum("aep_run_cost_total")
			return len(spans) >= want && costed
		})
	if err != nil {
		return err
	}
	writeWaterfall(w, spans)
	input, _ := samples.Sum("gen_ai_client_token_usage_sum", "gen_ai_token_type", "input")
	output, _ := samples.Sum("gen_ai_client_token_usage_sum", "gen_ai_token_type", "output")
	cost, _ := samples.Sum("aep_run_cost_total", "aep_cost_currency", "USD")
	fmt.Fprintf(w, "totals   | %.0f input tokens, %.0f output tokens, %g USD (scraped from %s)\n", input, output, cost, metricsURL)
	return nil
}

// awaitTelemetry polls the spans received and the prometheus scrape until
// done holds, and returns them.
func awaitTelemetry(ctx context.Context, traces *telemetrysink.Traces, metricsURL, what string,
	done func([]ptrace.Span, telemetrysink.Samples) bool) ([]ptrace.Span, telemetrysink.Samples, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		spans := traces.Spans()
		samples, _ := telemetrysink.Scrape(metricsURL)
		if done(spans, samples) {
			return spans, samples, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for %s (%d spans so far): %w; traces refused: %v",
				what, len(spans), ctx.Err(), traces.Refused())
		case <-t.C:
		}
	}
}

// writeWaterfall prints one waterfall per session (the spans' session.id,
// as a backend's session view groups them): on the session's timeline,
// each trace's root span in start order with its children under it. A
// run's trace is a root with its tool calls and waits; a tool call
// without a run (Codex, VS Code) is a root of its own.
func writeWaterfall(w io.Writer, spans []ptrace.Span) {
	slices.SortStableFunc(spans, func(a, b ptrace.Span) int { return cmp.Compare(a.StartTimestamp(), b.StartTimestamp()) })
	var sessions []string
	bySession := make(map[string][]ptrace.Span)
	for _, s := range spans {
		id := attr(s, "session.id")
		if _, ok := bySession[id]; !ok {
			sessions = append(sessions, id)
		}
		bySession[id] = append(bySession[id], s)
	}
	for _, id := range sessions {
		ss := bySession[id]
		start, end := ss[0].StartTimestamp(), ss[0].EndTimestamp()
		for _, s := range ss {
			end = max(end, s.EndTimestamp())
		}
		total := end.AsTime().Sub(start.AsTime())
		fmt.Fprintf(w, "waterfall| session %s, agent %s\n", id, attr(ss[0], "gen_ai.agent.name"))
		fmt.Fprintf(w, "waterfall| %-34s %9s %9s  %-18s %s\n", "span", "offset", "duration", "status", "timeline")
		for _, root := range ss {
			if !root.ParentSpanID().IsEmpty() {
				continue
			}
			writeSpanLine(w, root, "", start.AsTime(), total)
			for _, s := range ss {
				if s.TraceID() == root.TraceID() && s.ParentSpanID() == root.SpanID() {
					writeSpanLine(w, s, "  ", start.AsTime(), total)
				}
			}
		}
	}
}

func attr(s ptrace.Span, key string) string {
	v, _ := s.Attributes().Get(key)
	return v.AsString()
}

func writeSpanLine(w io.Writer, s ptrace.Span, indent string, origin time.Time, total time.Duration) {
	offset := s.StartTimestamp().AsTime().Sub(origin)
	d := s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime())
	status := "ok"
	switch outcome := attr(s, "aep.outcome"); outcome {
	case "denied", "cancelled", "timeout", "unanswered":
		status = outcome
	}
	if s.Status().Code() == ptrace.StatusCodeError {
		status = "error"
		if t, ok := s.Attributes().Get("error.type"); ok {
			status += " (" + t.Str() + ")"
		}
	}
	fmt.Fprintf(w, "waterfall| %-34s %9s %9s  %-18s |%s|\n", indent+s.Name(),
		"+"+offset.Round(time.Millisecond).String(), d.Round(time.Millisecond).String(), status, bar(offset, d, total))
}

// bar draws [offset, offset+d) on a barWidth-wide timeline of total.
func bar(offset, d, total time.Duration) string {
	if total <= 0 {
		return strings.Repeat("█", barWidth)
	}
	from := min(barWidth-1, int(int64(barWidth)*int64(max(offset, 0))/int64(total)))
	to := min(barWidth, max(from+1, int((int64(barWidth)*int64(offset+d)+int64(total)-1)/int64(total))))
	return strings.Repeat(" ", from) + strings.Repeat("█", to-from) + strings.Repeat(" ", barWidth-to)
}
