package aepconnector

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"
)

var update = flag.Bool("update", false, "rewrite the pinned testdata/*.txt renderings")

// harness runs both halves of one connector configuration over sinks.
type harness struct {
	tel     *componenttest.Telemetry
	traces  connector.Logs
	metrics connector.Logs
	spans   *consumertest.TracesSink
	points  *consumertest.MetricsSink
}

func newHarness(t *testing.T, cfg *Config) *harness {
	t.Helper()
	h := &harness{tel: componenttest.NewTelemetry(), spans: new(consumertest.TracesSink), points: new(consumertest.MetricsSink)}
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) })
	set := connectortest.NewNopSettings(componentType)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	f := NewFactory()
	if cfg == nil {
		cfg = f.CreateDefaultConfig().(*Config)
	}
	require.NoError(t, cfg.Validate())
	var err error
	h.traces, err = f.CreateLogsToTraces(context.Background(), set, cfg, h.spans)
	require.NoError(t, err)
	h.metrics, err = f.CreateLogsToMetrics(context.Background(), set, cfg, h.points)
	require.NoError(t, err)
	return h
}

// feed projects each event as the openhands receiver does (service.name =
// agent) and sends it to both halves, one event per batch.
func (h *harness) feed(t *testing.T, events ...*aep.Event) {
	t.Helper()
	for _, ev := range events {
		ld := logsOf(t, ev)
		require.NoError(t, h.traces.ConsumeLogs(context.Background(), ld))
		require.NoError(t, h.metrics.ConsumeLogs(context.Background(), ld))
	}
}

func logsOf(t testing.TB, events ...*aep.Event) plog.Logs {
	t.Helper()
	ld := plog.NewLogs()
	for _, ev := range events {
		rl := ld.ResourceLogs().AppendEmpty()
		projection.SetResource(rl.Resource(), ev.Agent)
		require.NoError(t, projection.ToLogRecord(ev, rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty(), projection.Options{}))
	}
	return ld
}

func (h *harness) allSpans() []ptrace.Span {
	var out []ptrace.Span
	for _, td := range h.spans.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func (h *harness) counter(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	return telemetrytest.Counter(t, h.tel, name, attrs...)
}

// renderSpans draws the span forest as text: each trace's root first, its
// children under it in start order, with offset from the root's start,
// duration, status and attributes.
func renderSpans(spans []ptrace.Span) string {
	byParent := make(map[pcommon.SpanID][]ptrace.Span)
	var roots []ptrace.Span
	for _, s := range spans {
		if s.ParentSpanID().IsEmpty() {
			roots = append(roots, s)
		} else {
			byParent[s.ParentSpanID()] = append(byParent[s.ParentSpanID()], s)
		}
	}
	byStart := func(s []ptrace.Span) {
		sort.SliceStable(s, func(i, j int) bool { return s[i].StartTimestamp() < s[j].StartTimestamp() })
	}
	byStart(roots)
	var b strings.Builder
	for _, root := range roots {
		fmt.Fprintf(&b, "trace %s\n", root.TraceID())
		writeSpan(&b, root, root.StartTimestamp(), 1)
		kids := byParent[root.SpanID()]
		delete(byParent, root.SpanID())
		byStart(kids)
		for _, k := range kids {
			if k.TraceID() != root.TraceID() {
				fmt.Fprintf(&b, "  !! child in another trace\n")
			}
			writeSpan(&b, k, root.StartTimestamp(), 2)
		}
	}
	var orphans []ptrace.Span
	for _, kids := range byParent {
		orphans = append(orphans, kids...)
	}
	byStart(orphans)
	for _, o := range orphans {
		fmt.Fprintf(&b, "orphan of %s in trace %s\n", o.ParentSpanID(), o.TraceID())
		writeSpan(&b, o, o.StartTimestamp(), 1)
	}
	return b.String()
}

func writeSpan(b *strings.Builder, s ptrace.Span, origin pcommon.Timestamp, depth int) {
	indent := strings.Repeat("  ", depth)
	offset := time.Duration(s.StartTimestamp() - origin)
	fmt.Fprintf(b, "%s%s span=%s +%s %s status=%s\n", indent, s.Name(), s.SpanID(), offset,
		s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime()), s.Status().Code())
	fmt.Fprintf(b, "%s  %s\n", indent, renderMap(s.Attributes()))
	for _, e := range s.Events().All() {
		fmt.Fprintf(b, "%s  event %s +%s %s\n", indent, e.Name(), time.Duration(e.Timestamp()-s.StartTimestamp()), renderMap(e.Attributes()))
	}
}

func renderMap(m pcommon.Map) string {
	keys := make([]string, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v, _ := m.Get(k)
		parts[i] = k + "=" + v.AsString()
	}
	return strings.Join(parts, " ")
}

// renderMetrics draws the last point of every series, sorted.
func renderMetrics(all []pmetric.Metrics) string {
	last := make(map[string]string)
	for _, md := range all {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					switch m.Type() {
					case pmetric.MetricTypeSum:
						for _, dp := range m.Sum().DataPoints().All() {
							key := fmt.Sprintf("%s{%s}", m.Name(), renderMap(dp.Attributes()))
							last[key] = fmt.Sprintf("%s %s sum=%g", key, m.Unit(), dp.DoubleValue())
						}
					case pmetric.MetricTypeHistogram:
						for _, dp := range m.Histogram().DataPoints().All() {
							key := fmt.Sprintf("%s{%s}", m.Name(), renderMap(dp.Attributes()))
							last[key] = fmt.Sprintf("%s %s count=%d sum=%g", key, m.Unit(), dp.Count(), dp.Sum())
						}
					}
				}
			}
		}
	}
	lines := make([]string, 0, len(last))
	for _, l := range last {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// requirePinned compares got with testdata/name, rewriting it under -update.
func requirePinned(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}
