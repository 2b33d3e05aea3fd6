package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
)

const scopeName = "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

// telemetry holds the connector's internal metrics (README "Internal
// metrics").
type telemetry struct {
	ignored       metric.Int64Counter
	evicted       metric.Int64Counter
	seriesDropped metric.Int64Counter
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	b := telemetrydecl.New(set.MeterProvider.Meter(scopeName))
	var t telemetry
	t.ignored = b.Int64Counter("otelcol_aep_connector_records_ignored",
		"Log records that are not AEP events (not_aep) or do not decode as one (invalid).", "{record}")
	t.evicted = b.Int64Counter("otelcol_aep_connector_open_spans_evicted",
		"Open starts dropped before their end arrived, by reason (capacity, expired).", "{span}")
	t.seriesDropped = b.Int64Counter("otelcol_aep_connector_series_dropped",
		"Metric points dropped because max_series was reached.", "{point}")
	return &t, b.Err()
}

func (t *telemetry) ignore(ctx context.Context, reason string) {
	t.ignored.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}
