package livetest

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

var updateSpans = flag.Bool("update-spans", false, "rewrite testdata/recorded-spans.txt")

// runInputTokens adds up the input tokens on a session's run terminals;
// false unless every run ended run.finished (a failed or cancelled run has
// no usage field in its schema) and at least one did.
func runInputTokens(stream []*aep.Event) (int64, bool) {
	var sum int64
	finished := 0
	for _, ev := range stream {
		switch ev.Type {
		case "run.failed", "run.cancelled":
			return 0, false
		case "run.finished":
			finished++
			n, _ := ev.Data["gen_ai.usage.input_tokens"].(json.Number).Int64()
			sum += n
		}
	}
	return sum, finished > 0
}

// finalPromptTokens is a conversation's accumulated prompt tokens as its
// last recorded info reports them.
func finalPromptTokens(t *testing.T, info json.RawMessage) (id string, tokens int64) {
	var c struct {
		ID    string `json:"id"`
		Stats struct {
			Usage map[string]struct {
				Tokens struct {
					Prompt int64 `json:"prompt_tokens"`
				} `json:"accumulated_token_usage"`
			} `json:"usage_to_metrics"`
		} `json:"stats"`
	}
	require.NoError(t, json.Unmarshal(info, &c))
	for _, u := range c.Stats.Usage {
		tokens += u.Tokens.Prompt
	}
	return c.ID, tokens
}

// conversationNames reads testdata/recorded/conversations.txt: id → scenario.
func conversationNames(t *testing.T) map[string]string {
	f, err := os.Open(filepath.Join(recordings, "conversations.txt"))
	require.NoError(t, err)
	defer f.Close()
	names := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, id, ok := strings.Cut(sc.Text(), " "); ok {
			names[id] = name
		}
	}
	return names
}

// TestRecordedRunsAsTraces replays the recorded conversations (session
// socket, capture metadata) into the receiver and its log records into
// the aep connector: every record's trace context names one of the spans,
// the span tree (names, durations from the server's timestamps, outcomes,
// usage) is pinned, and wherever every run finished, the runs' input
// tokens add up to the conversation's final stats on the server.
func TestRecordedRunsAsTraces(t *testing.T) {
	r := startReplay(t, filepath.Join(recordings, "session-metadata"), "session", aep.CaptureMetadata)
	tr, sink := r.transcript, r.sink
	awaitReplayed(t, r.replayer, sink, r.want)

	f := aepconnector.NewFactory()
	spansSink := new(consumertest.TracesSink)
	conn, err := f.CreateLogsToTraces(context.Background(), connectortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), spansSink)
	require.NoError(t, err)
	var traced []pcommon.SpanID
	for _, logs := range sink.AllLogs() {
		require.NoError(t, conn.ConsumeLogs(context.Background(), logs))
		for _, rl := range logs.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					if !lr.SpanID().IsEmpty() {
						traced = append(traced, lr.SpanID())
					}
				}
			}
		}
	}
	spans := map[pcommon.SpanID]ptrace.Span{}
	for _, td := range spansSink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					spans[s.SpanID()] = s
				}
			}
		}
	}
	require.NotEmpty(t, traced)
	for _, id := range traced {
		assert.Contains(t, spans, id, "a log record's span_id names no span")
	}
	pinSpans(t, spans, conversationNames(t))

	events := aeptest.EventsOf(t, sink.AllLogs()...)
	checked := 0
	for _, info := range tr.Conversations {
		id, final := finalPromptTokens(t, info)
		var stream []*aep.Event
		for _, ev := range events {
			if ev.Session == id {
				stream = append(stream, ev)
			}
		}
		if got, ok := runInputTokens(stream); ok {
			checked++
			assert.Equal(t, final, got, "conversation %s: the runs' input tokens against the server's stats", id)
		}
	}
	assert.Positive(t, checked)
}

// pinSpans renders each conversation's runs as span trees, without what a
// replay changes (ids, receive times), and compares them with
// testdata/recorded-spans.txt.
func pinSpans(t *testing.T, spans map[pcommon.SpanID]ptrace.Span, names map[string]string) {
	attr := func(s ptrace.Span, k string) string {
		if v, ok := s.Attributes().Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	line := func(s ptrace.Span) string {
		// An unanswered call ends with its run's terminal as the receiver
		// saw it, a replay's receive time: no fixed duration.
		d := "-"
		if attr(s, "aep.outcome") != "unanswered" {
			d = s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime()).Round(time.Millisecond).String()
		}
		out := fmt.Sprintf("%s %s %s status=%s", s.Name(), d, attr(s, "aep.outcome"), s.Status().Code())
		for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "aep.cost.total", "error.type"} {
			if v := attr(s, k); v != "" {
				out += " " + k + "=" + v
			}
		}
		return out
	}
	var roots []ptrace.Span
	children := map[pcommon.SpanID][]string{}
	for _, s := range spans {
		if s.ParentSpanID().IsEmpty() {
			roots = append(roots, s)
			continue
		}
		// Children sorted by their line: a replay's receive times place
		// them, and only their durations are the server's.
		children[s.ParentSpanID()] = append(children[s.ParentSpanID()], line(s))
	}
	var b strings.Builder
	keys := make([]string, 0, len(roots))
	byKey := map[string]ptrace.Span{}
	for _, r := range roots {
		conv, n, _ := strings.Cut(strings.TrimPrefix(attr(r, "aep.run_id"), "run:"), ":")
		key := names[conv] + " run " + n
		keys = append(keys, key)
		byKey[key] = r
	}
	slices.Sort(keys)
	for _, key := range keys {
		r := byKey[key]
		fmt.Fprintf(&b, "%s: %s\n", key, line(r))
		kids := children[r.SpanID()]
		slices.Sort(kids)
		for _, k := range kids {
			fmt.Fprintf(&b, "  %s\n", k)
		}
	}
	path := filepath.Join("testdata", "recorded-spans.txt")
	if *updateSpans {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	pinned, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(pinned), b.String())
}
