package aepinboundprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
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
	records    metric.Int64Counter
	evicted    metric.Int64Counter
	aepRefused metric.Int64Counter
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	b := telemetrydecl.New(set.MeterProvider.Meter(scopeName))
	var t telemetry
	t.records = b.Int64Counter("otelcol_aepinbound_records",
		"Vendor log records seen, by agent and outcome (mapped, skipped, no_session, refused).", "{record}")
	t.evicted = b.Int64Counter("otelcol_aepinbound_sessions_evicted",
		"Sessions forgotten because max_sessions was reached; one seen again continues in a new epoch.", "{session}")
	t.aepRefused = b.Int64Counter("otelcol_aepinbound_aep_refused",
		"Records that already were AEP (a dev.aep. event name) when they arrived: removed, never trusted as AEP.", "{record}")
	return &t, b.Err()
}

func (t *telemetry) record(ctx context.Context, agent, outcome string) {
	t.records.Add(ctx, 1, metric.WithAttributes(attribute.String("agent", agent), attribute.String("outcome", outcome)))
}
