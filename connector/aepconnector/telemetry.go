package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
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
	m := set.MeterProvider.Meter(scopeName)
	var t telemetry
	var errs [3]error
	t.ignored, errs[0] = m.Int64Counter("otelcol_aep_connector_records_ignored",
		metric.WithDescription("Log records that are not AEP events (not_aep) or do not decode as one (invalid)."),
		metric.WithUnit("{record}"))
	t.evicted, errs[1] = m.Int64Counter("otelcol_aep_connector_open_spans_evicted",
		metric.WithDescription("Open starts dropped before their end arrived, by reason (capacity, expired)."),
		metric.WithUnit("{span}"))
	t.seriesDropped, errs[2] = m.Int64Counter("otelcol_aep_connector_series_dropped",
		metric.WithDescription("Metric points dropped because max_series was reached."),
		metric.WithUnit("{point}"))
	return &t, errors.Join(errs[:]...)
}

func (t *telemetry) ignore(ctx context.Context, reason string) {
	t.ignored.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}
