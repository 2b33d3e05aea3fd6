package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
)

// targetTelemetry is the discovery pool's share of the metrics (README
// "Metrics"): by source and state, never by target, so a fleet of
// thousands adds no cardinality.
type targetTelemetry struct {
	targets   metric.Int64Gauge
	refreshes metric.Int64Counter
}

func newTargetTelemetry(b *telemetrydecl.Builder) targetTelemetry {
	return targetTelemetry{
		targets: b.Int64Gauge("otelcol_openhands_targets",
			"Discovered agent servers by state: watched (listed, with a watch), draining (no longer listed, its sessions still open) or waiting (listed, for a slot under targets.max_targets or for attach_rate).",
			"{server}"),
		refreshes: b.Int64Counter("otelcol_openhands_target_refreshes",
			"Target source refreshes by source and outcome: ok, or failed (the last good set stands).", "{refresh}"),
	}
}

func (t targetTelemetry) targetStates(ctx context.Context, watched, draining, waiting int) {
	for _, s := range []struct {
		state string
		n     int
	}{{"watched", watched}, {"draining", draining}, {"waiting", waiting}} {
		t.targets.Record(ctx, int64(s.n), metric.WithAttributes(attribute.String("state", s.state)))
	}
}

func (t targetTelemetry) refreshed(ctx context.Context, source string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	t.refreshes.Add(ctx, 1, metric.WithAttributes(attribute.String("source", source), attribute.String("outcome", outcome)))
}
