package aepinboundprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const scopeName = "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"

// Outcomes of a vendor record (README "Internal metrics").
const (
	outcomeMapped    = "mapped"     // replaced by its AEP event
	outcomeSkipped   = "skipped"    // primary mode emits nothing for it; removed
	outcomeNoSession = "no_session" // no usable session identity; passed through
	outcomeRefused   = "refused"    // the projection refused its event; passed through
)

type telemetry struct {
	records metric.Int64Counter
	evicted metric.Int64Counter
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	m := set.MeterProvider.Meter(scopeName)
	var t telemetry
	var errs [2]error
	t.records, errs[0] = m.Int64Counter("otelcol_aepinbound_records",
		metric.WithDescription("Vendor log records seen, by agent and outcome (mapped, skipped, no_session, refused)."),
		metric.WithUnit("{record}"))
	t.evicted, errs[1] = m.Int64Counter("otelcol_aepinbound_sessions_evicted",
		metric.WithDescription("Sessions forgotten because max_sessions was reached; one seen again continues in a new epoch."),
		metric.WithUnit("{session}"))
	return &t, errors.Join(errs[:]...)
}

func (t *telemetry) record(ctx context.Context, agent, outcome string) {
	t.records.Add(ctx, 1, metric.WithAttributes(attribute.String("agent", agent), attribute.String("outcome", outcome)))
}
