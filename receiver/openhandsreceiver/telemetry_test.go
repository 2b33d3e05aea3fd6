package openhandsreceiver

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl/telemetrydecltest"
)

func TestREADMEListsEveryMetric(t *testing.T) {
	telemetrydecltest.RequireREADMEMatches(t, "otelcol_openhands_", newTelemetry)
}

// observed sums what an observable counter reports, and counts series.
type observed struct {
	embedded.Int64Observer
	series int
	total  int64
}

func (o *observed) Observe(v int64, _ ...metric.ObserveOption) {
	o.series++
	o.total += v
}

func TestEventCountsBoundTheirValues(t *testing.T) {
	c := eventCounts{key: "type"}
	for i := range maxCountedValues + 44 {
		c.add(fmt.Sprint("x.vendor.kind", i))
	}
	c.add("x.vendor.kind0")

	var o observed
	require.NoError(t, c.observe(context.Background(), &o))
	assert.Equal(t, int64(maxCountedValues+45), o.total, "every event is counted")
	assert.Equal(t, maxCountedValues+1, o.series, "values past the bound count under other")
	assert.Equal(t, int64(2), c.byValue["x.vendor.kind0"].n.Load())
	assert.Equal(t, int64(44), c.byValue["other"].n.Load())
}
