// Package telemetrytest reads a component's internal metrics in tests.
package telemetrytest // import "github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Counter sums the data points of the int64 counter name whose attributes
// include attrs; it is 0 until the counter is first recorded.
func Counter(t testing.TB, tel *componenttest.Telemetry, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0 // not recorded yet
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is not an int64 sum", name)
	var total int64
	for _, dp := range sum.DataPoints {
		if hasAttributes(dp.Attributes, attrs) {
			total += dp.Value
		}
	}
	return total
}

func hasAttributes(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}
