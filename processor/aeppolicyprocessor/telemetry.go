package aeppolicyprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor/internal/policy"
)

const scopeName = "github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"

// Outcomes of an action (README "Internal metrics").
const (
	actionOriginated = "originated"  // handed to the gate, which acks it in the session
	actionGateClosed = "gate_closed" // the gate is off: nothing was sent
	actionFailed     = "failed"      // the command could not be composed
)

type telemetry struct {
	actions    metric.Int64Counter
	breaches   metric.Int64Counter
	unreadable metric.Int64Counter
	storage    metric.Int64Counter
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	b := telemetrydecl.New(set.MeterProvider.Meter(scopeName))
	var t telemetry
	t.breaches = b.Int64Counter("otelcol_aeppolicy_breaches",
		"Policy breaches recorded, once each, by agent, policy and level (soft, hard).", "{breach}")
	t.actions = b.Int64Counter("otelcol_aeppolicy_actions",
		"Actions of hard breaches, by agent, policy, action (pause) and outcome (originated, gate_closed, failed).", "{action}")
	t.unreadable = b.Int64Counter("otelcol_aeppolicy_records_unreadable",
		"AEP log records the projection could not read back; they pass through unjudged.", "{record}")
	t.storage = b.Int64Counter("otelcol_aeppolicy_storage_errors",
		"Storage reads and writes that failed; a failed write refuses the batch, which the sender retries.", "{error}")
	return &t, b.Err()
}

func (t *telemetry) breach(ctx context.Context, b policy.Breach) {
	t.breaches.Add(ctx, 1, metric.WithAttributes(attribute.String("agent", b.Agent),
		attribute.String("policy", b.Policy), attribute.String("level", string(b.Level))))
}

func (t *telemetry) action(ctx context.Context, b policy.Breach, action, outcome string) {
	t.actions.Add(ctx, 1, metric.WithAttributes(attribute.String("agent", b.Agent), attribute.String("policy", b.Policy),
		attribute.String("action", action), attribute.String("outcome", outcome)))
}
