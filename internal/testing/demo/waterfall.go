package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrysink"
)

// barWidth is the width of the waterfall's timeline column, nameWidth
// its span column's: a delegated run's line, two levels down, fits.
const barWidth, nameWidth = 40, 46

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

// writeWaterfall prints one waterfall per session (the root spans'
// session.id, as a backend's session view groups them): on the session's
// timeline, each trace's root span in start order with its descendants
// nested under it by their parent span. A run's trace is a root with its
// tool calls and waits; a delegated run, a child session's, is in its
// parent's trace under the tool call that started it, and is shown there;
// a tool call without a run (Codex, VS Code) is a root of its own. A span
// whose parent never arrived is shown as a root.
func writeWaterfall(w io.Writer, spans []ptrace.Span) {
	slices.SortStableFunc(spans, func(a, b ptrace.Span) int { return cmp.Compare(a.StartTimestamp(), b.StartTimestamp()) })
	type spanKey struct {
		trace pcommon.TraceID
		span  pcommon.SpanID
	}
	received := make(map[spanKey]bool, len(spans))
	for _, s := range spans {
		received[spanKey{s.TraceID(), s.SpanID()}] = true
	}
	children := make(map[spanKey][]ptrace.Span)
	var sessions []string
	roots := make(map[string][]ptrace.Span)
	for _, s := range spans {
		if parent := (spanKey{s.TraceID(), s.ParentSpanID()}); !s.ParentSpanID().IsEmpty() && received[parent] {
			children[parent] = append(children[parent], s)
			continue
		}
		id := attr(s, "session.id")
		if _, ok := roots[id]; !ok {
			sessions = append(sessions, id)
		}
		roots[id] = append(roots[id], s)
	}
	// tree visits s and its descendants, depth first, children in start
	// order, with the session of the span above (for a root, its own).
	var tree func(s ptrace.Span, depth int, above string, visit func(s ptrace.Span, depth int, above string))
	tree = func(s ptrace.Span, depth int, above string, visit func(ptrace.Span, int, string)) {
		visit(s, depth, above)
		for _, c := range children[spanKey{s.TraceID(), s.SpanID()}] {
			tree(c, depth+1, attr(s, "session.id"), visit)
		}
	}
	for _, id := range sessions {
		start, end := roots[id][0].StartTimestamp(), roots[id][0].EndTimestamp()
		for _, root := range roots[id] {
			tree(root, 0, id, func(s ptrace.Span, _ int, _ string) { end = max(end, s.EndTimestamp()) })
		}
		total := end.AsTime().Sub(start.AsTime())
		fmt.Fprintf(w, "waterfall| session %s, agent %s\n", id, attr(roots[id][0], "gen_ai.agent.name"))
		fmt.Fprintf(w, "waterfall| %-*s %9s %9s  %-18s %s\n", nameWidth, "span", "offset", "duration", "status", "timeline")
		for _, root := range roots[id] {
			tree(root, 0, id, func(s ptrace.Span, depth int, above string) {
				name := strings.Repeat("  ", depth) + s.Name()
				if session := attr(s, "session.id"); session != above {
					name += " (session " + shortID(session) + ")" // where a delegated run starts
				}
				writeSpanLine(w, s, name, start.AsTime(), total)
			})
		}
	}
}

// shortID is the first eight characters of a session id, as the event
// lines show it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// attr is the span's attribute at key as a string, "" when it has none.
func attr(s ptrace.Span, key string) string {
	if v, ok := s.Attributes().Get(key); ok {
		return v.AsString()
	}
	return ""
}

func writeSpanLine(w io.Writer, s ptrace.Span, name string, origin time.Time, total time.Duration) {
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
	fmt.Fprintf(w, "waterfall| %-*s %9s %9s  %-18s |%s|\n", nameWidth, name,
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
