package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

// metricDef is one metric the connector emits (README "Metrics").
type metricDef struct {
	name, description, unit string
	// bounds makes it a histogram with these explicit bucket bounds; a
	// metric without bounds is a monotonic sum.
	bounds []float64
}

// Bucket bounds: the GenAI semantic conventions' advice for token counts
// and operation durations; attention waits are human-scale.
var (
	tokenBounds    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBounds = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	waitBounds     = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600}
)

var (
	metricTokenUsage = &metricDef{"gen_ai.client.token.usage",
		"Tokens used per agent run or model call, by token type (input, output).", "{token}", tokenBounds}
	metricOperationDuration = &metricDef{"gen_ai.client.operation.duration",
		"Duration of agent runs (invoke_agent) and tool calls (execute_tool), by outcome.", "s", durationBounds}
	metricRunCost = &metricDef{"aep.run.cost",
		"Cost of agent runs and model calls as the agent reported it, else at the configured price of the model, in the currency the aep.cost.currency attribute names.", "", nil}
	metricAttentionWait = &metricDef{"aep.attention.wait.duration",
		"Time an agent waited for a human, from attention.requested to its resolution or timeout.", "s", waitBounds}
	metricEvents = &metricDef{"aep.events",
		"AEP events seen, by type and severity.", "{event}", nil}
)

// metricsConnector aggregates cumulative metrics from the events and the
// operations they end, and emits the series each batch touched.
type metricsConnector struct {
	component.StartFunc
	component.ShutdownFunc

	next      consumer.Metrics
	core      *core
	maxSeries int
	now       func() time.Time
	// latest adds the current GenAI conventions' agent metrics (semconv.go).
	latest bool
	// prices cost model calls that report tokens but no cost.
	prices usage.Prices

	mu     sync.Mutex
	series map[string]*series
}

func (*metricsConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// series is one cumulative time series: a sum or a histogram.
type series struct {
	def   *metricDef
	agent string
	attrs []label // sorted by key
	start pcommon.Timestamp
	sum   float64
	count uint64
	// buckets has len(def.bounds)+1 counts, for histograms.
	buckets []uint64
}

type label struct{ key, value string }

func (c *metricsConnector) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	touched := make(map[*series]bool)
	record := func(def *metricDef, agent string, v float64, attrs ...label) {
		if s := c.seriesFor(ctx, def, agent, attrs); s != nil {
			s.add(v)
			touched[s] = true
		}
	}
	c.core.consume(ctx, ld, func(_ int, ev *aep.Event, _ time.Time, ops []*operation) {
		record(metricEvents, ev.Agent, 1,
			label{attrType, ev.Type}, label{attrSeverity, string(ev.EffectiveSeverity())})
		if operation, ok := usage.ModelCall(ev); ok {
			c.recordUsage(ev, operation, record)
		}
		for _, op := range ops {
			c.recordOperation(op, record)
		}
	})
	if len(touched) == 0 {
		return nil
	}
	return c.next.ConsumeMetrics(ctx, c.build(touched))
}

type recordFunc func(def *metricDef, agent string, v float64, attrs ...label)

// recordOperation records an ended operation's duration, and for a run its
// token usage and cost; opted in, the current conventions' metrics too
// (semconv.go). An operation whose start is unknown has no duration to
// record.
func (c *metricsConnector) recordOperation(o *operation, record recordFunc) {
	ev := o.terminal
	seconds := o.end.Sub(o.start).Seconds()
	switch o.pos.Kind {
	case runtrace.KindAttention:
		if o.startKnown {
			record(metricAttentionWait, ev.Agent, seconds, label{attrOutcome, o.outcome()})
		}
		return
	case runtrace.KindTool:
		if o.startKnown {
			c.recordDuration(record, metricExecuteToolDuration, ev.Agent, seconds, label{attrOperationName, operationExecuteTool},
				label{attrToolName, o.toolName()}, label{attrOutcome, o.outcome()}, label{attrErrorType, o.errorType()})
		}
		return
	}
	if o.startKnown {
		c.recordDuration(record, metricInvokeAgentDuration, ev.Agent, seconds, label{attrOperationName, operationInvokeAgent},
			label{attrOutcome, o.outcome()}, label{attrErrorType, o.errorType()})
	}
	if c.latest {
		recordCallCounts(o, record)
	}
	c.recordUsage(ev, operationInvokeAgent, record)
}

// recordUsage records the token usage and cost ev reports for one
// operation: a run's on its terminal, a model call's on its record. The
// cost is the one the event reports, else the price of its model.
func (c *metricsConnector) recordUsage(ev *aep.Event, operation string, record recordFunc) {
	model, _ := ev.Data[attrRequestModel].(string)
	for _, tt := range []struct{ attr, tokenType string }{{attrInputTokens, "input"}, {attrOutputTokens, "output"}} {
		if n, ok := usage.Tokens(ev, tt.attr); ok {
			record(metricTokenUsage, ev.Agent, float64(n), label{attrOperationName, operation},
				label{attrTokenType, tt.tokenType}, label{attrRequestModel, model})
		}
	}
	if currency, total, ok := c.prices.Cost(ev); ok {
		record(metricRunCost, ev.Agent, total, label{attrCostCurrency, currency},
			label{attrOperationName, operation}, label{attrRequestModel, model})
	}
}

// recordDuration records an operation's duration in
// gen_ai.client.operation.duration and, opted in, in latest, the current
// conventions' duration metric of its kind, under the same labels.
func (c *metricsConnector) recordDuration(record recordFunc, latest *metricDef, agent string, seconds float64, labels ...label) {
	if c.latest {
		// seriesFor sorts the labels in place and keeps them: latest's own copy.
		record(latest, agent, seconds, slices.Clone(labels)...)
	}
	record(metricOperationDuration, agent, seconds, labels...)
}

// seriesFor finds or creates the series; nil when max_series is reached.
// Empty attribute values are left out.
func (c *metricsConnector) seriesFor(ctx context.Context, def *metricDef, agent string, attrs []label) *series {
	attrs = slices.DeleteFunc(attrs, func(a label) bool { return a.value == "" })
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].key < attrs[j].key })
	var b strings.Builder
	b.WriteString(def.name)
	b.WriteByte(0)
	b.WriteString(agent)
	for _, a := range attrs {
		b.WriteByte(0)
		b.WriteString(a.key)
		b.WriteByte(0)
		b.WriteString(a.value)
	}
	key := b.String()
	if s, ok := c.series[key]; ok {
		return s
	}
	if len(c.series) >= c.maxSeries {
		c.core.tel.seriesDropped.Add(ctx, 1)
		return nil
	}
	s := &series{def: def, agent: agent, attrs: attrs, start: pcommon.NewTimestampFromTime(c.now())}
	if def.bounds != nil {
		s.buckets = make([]uint64, len(def.bounds)+1)
	}
	c.series[key] = s
	return s
}

func (s *series) add(v float64) {
	s.sum += v
	s.count++
	if s.buckets != nil {
		// Bucket i counts values in (bounds[i-1], bounds[i]].
		i, _ := slices.BinarySearch(s.def.bounds, v)
		s.buckets[i]++
	}
}

// build renders the touched series: one resource per agent (service.name,
// as the projection sets it), cumulative points since each series began.
func (c *metricsConnector) build(touched map[*series]bool) pmetric.Metrics {
	ordered := make([]*series, 0, len(touched))
	for s := range touched {
		ordered = append(ordered, s)
	}
	sort.Slice(ordered, func(i, j int) bool {
		a, b := ordered[i], ordered[j]
		if a.agent != b.agent {
			return a.agent < b.agent
		}
		return a.def.name < b.def.name
	})
	md := pmetric.NewMetrics()
	now := pcommon.NewTimestampFromTime(c.now())
	var sm pmetric.ScopeMetrics
	var m pmetric.Metric
	agent, name := "", ""
	for i, s := range ordered {
		if i == 0 || s.agent != agent {
			rm := md.ResourceMetrics().AppendEmpty()
			rm.Resource().Attributes().PutStr("service.name", s.agent)
			sm = rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName(scopeName)
			agent, name = s.agent, ""
		}
		if s.def.name != name {
			m = newMetric(sm.Metrics().AppendEmpty(), s.def)
			name = s.def.name
		}
		s.putPoint(m, now)
	}
	return md
}

func newMetric(m pmetric.Metric, def *metricDef) pmetric.Metric {
	m.SetName(def.name)
	m.SetDescription(def.description)
	m.SetUnit(def.unit)
	if def.bounds != nil {
		m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	} else {
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	}
	return m
}

func (s *series) putPoint(m pmetric.Metric, now pcommon.Timestamp) {
	var attrs pcommon.Map
	if s.def.bounds != nil {
		dp := m.Histogram().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(s.start)
		dp.SetTimestamp(now)
		dp.SetCount(s.count)
		dp.SetSum(s.sum)
		dp.ExplicitBounds().FromRaw(s.def.bounds)
		dp.BucketCounts().FromRaw(s.buckets)
		attrs = dp.Attributes()
	} else {
		dp := m.Sum().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(s.start)
		dp.SetTimestamp(now)
		dp.SetDoubleValue(s.sum)
		attrs = dp.Attributes()
	}
	attrs.PutStr(attrAgentName, s.agent)
	for _, a := range s.attrs {
		attrs.PutStr(a.key, a.value)
	}
}
