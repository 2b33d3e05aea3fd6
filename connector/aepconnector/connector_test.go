package aepconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
)

func goldenEvents(t *testing.T) []*aep.Event {
	t.Helper()
	var events []*aep.Event
	for _, line := range aeptest.Golden(t) {
		events = append(events, line.Event)
	}
	return events
}

// TestGoldenSpans pins the span forest of the golden corpus: runs with and
// without run.started, a tool call answered and one denied with no
// request, a failed tool under a failed run, attention waits resolved and
// timed out (answers without a run found by their subject), an error.raised
// as a span event.
func TestGoldenSpans(t *testing.T) {
	h := newHarness(t, nil)
	h.feed(t, goldenEvents(t)...)
	requirePinned(t, "golden_spans.txt", renderSpans(h.allSpans()))
}

// TestGoldenMetrics pins the last cumulative point of every series.
func TestGoldenMetrics(t *testing.T) {
	h := newHarness(t, nil)
	h.feed(t, goldenEvents(t)...)
	requirePinned(t, "golden_metrics.txt", renderMetrics(h.points.AllMetrics()))
}

func TestNotAEPRecordsAreCountedAndSkipped(t *testing.T) {
	h := newHarness(t, nil)
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("plain")
	require.NoError(t, h.traces.ConsumeLogs(context.Background(), ld))
	require.NoError(t, h.metrics.ConsumeLogs(context.Background(), ld))
	assert.Zero(t, h.spans.SpanCount())
	assert.Zero(t, h.points.DataPointCount())
	assert.Equal(t, int64(2), h.counter(t, "otelcol_aep_connector_records_ignored", attribute.String("reason", "not_aep")))
}

func toolEvent(typ, run, callID string, at time.Time) *aep.Event {
	return &aep.Event{
		AEP: aep.Version, ID: typ + "-" + run + "-" + callID, Type: typ, Time: at.UTC().Format(time.RFC3339Nano),
		Source: "aep://test/agent/a/session/s", Agent: "a", Session: "s", Run: run, Seq: aep.Int64(0),
		Data: map[string]any{"tool": map[string]any{"name": "bash", "call_id": callID}},
	}
}

// TestOpenStartsBounded: starts whose end never comes are evicted, oldest
// first, at max_entries, and swept after the TTL; both are counted, and a
// terminal whose start was evicted still becomes a (zero-length) span.
func TestOpenStartsBounded(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.OpenSpans.MaxEntries = 2
	cfg.OpenSpans.TTL = time.Minute
	h := newHarness(t, cfg)
	clock := time.Unix(1_800_000_000, 0)
	for _, c := range []*core{h.traces.(*tracesConnector).core, h.metrics.(*metricsConnector).core} {
		c.tracker.now = func() time.Time { return clock }
	}
	at := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	h.feed(t, toolEvent("tool.requested", "r", "1", at), toolEvent("tool.requested", "r", "2", at), toolEvent("tool.requested", "r", "3", at))
	assert.Equal(t, int64(2), h.counter(t, "otelcol_aep_connector_open_spans_evicted", attribute.String("reason", "capacity")),
		"one per half")

	h.feed(t, toolEvent("tool.completed", "r", "1", at.Add(time.Second)), toolEvent("tool.completed", "r", "2", at.Add(time.Second)))
	spans := h.allSpans()
	require.Len(t, spans, 2)
	first, _ := spans[0].Attributes().Get(attrStartUnknown)
	assert.True(t, first.Bool(), "call 1 was evicted: its start is unknown")
	assert.Equal(t, time.Second, spans[1].EndTimestamp().AsTime().Sub(spans[1].StartTimestamp().AsTime()), "call 2 was kept")

	clock = clock.Add(2 * time.Minute)
	h.feed(t, toolEvent("tool.completed", "r", "3", at.Add(time.Second)))
	assert.Equal(t, int64(2), h.counter(t, "otelcol_aep_connector_open_spans_evicted", attribute.String("reason", "expired")))
	for _, c := range []*core{h.traces.(*tracesConnector).core, h.metrics.(*metricsConnector).core} {
		assert.Zero(t, c.tracker.order.Len())
		assert.Empty(t, c.tracker.open)
	}
}

// TestMaxSeries: points beyond max_series are dropped and counted.
func TestMaxSeries(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxSeries = 1
	h := newHarness(t, cfg)
	at := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	h.feed(t, toolEvent("tool.requested", "r", "1", at), toolEvent("tool.completed", "r", "1", at.Add(time.Second)))
	assert.Equal(t, int64(2), h.counter(t, "otelcol_aep_connector_series_dropped"))
}

// BenchmarkConnectorPerRecord is the connector's cost per AEP record, both
// halves, over the golden corpus, next to "decode": the projection's
// FromLogRecord over the same records, which every record pays first (and
// BenchmarkFromLogRecord in internal/aep/projection, one small record).
func BenchmarkConnectorPerRecord(b *testing.B) {
	var events []*aep.Event
	for _, line := range aeptest.Golden(b) {
		events = append(events, line.Event)
	}
	ld := logsOf(b, events...)
	f := NewFactory()
	set := connectortest.NewNopSettings(componentType)
	cfg := f.CreateDefaultConfig()
	traces, err := f.CreateLogsToTraces(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(b, err)
	metrics, err := f.CreateLogsToMetrics(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(b, err)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, rl := range ld.ResourceLogs().All() {
				if _, err := projection.FromLogRecord(rl.ScopeLogs().At(0).LogRecords().At(0), rl.Resource()); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/record")
	})
	for _, half := range []struct {
		name string
		c    interface {
			ConsumeLogs(context.Context, plog.Logs) error
		}
	}{{"traces", traces}, {"metrics", metrics}} {
		b.Run(half.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := half.c.ConsumeLogs(context.Background(), ld); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/record")
		})
	}
}

// TestUnansweredCallsEndWithTheirRun: a tool call still open when its run
// ends (a user rejected it) becomes a span to the run's end, marked
// unanswered, so that every event of the run names a span.
func TestUnansweredCallsEndWithTheirRun(t *testing.T) {
	h := newHarness(t, nil)
	at := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	run := func(typ string, d time.Duration) *aep.Event {
		ev := toolEvent(typ, "r", "", at.Add(d))
		ev.Data = map[string]any{}
		return ev
	}
	h.feed(t, run("run.started", 0), toolEvent("tool.requested", "r", "1", at.Add(time.Second)), run("run.finished", 3*time.Second))
	spans := h.allSpans()
	require.Len(t, spans, 2)
	tool := spans[0]
	assert.Equal(t, "execute_tool bash", tool.Name())
	outcome, _ := tool.Attributes().Get(attrOutcome)
	assert.Equal(t, "unanswered", outcome.Str())
	assert.Equal(t, 2*time.Second, tool.EndTimestamp().AsTime().Sub(tool.StartTimestamp().AsTime()))
	assert.Equal(t, spans[1].SpanID(), tool.ParentSpanID())
	for _, c := range []*core{h.traces.(*tracesConnector).core, h.metrics.(*metricsConnector).core} {
		assert.Zero(t, c.tracker.order.Len(), "nothing of the run stays open")
	}
}
