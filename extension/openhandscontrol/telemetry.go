package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
)

const scopeName = "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

// Command outcomes that are not an ack decision: the outcome attribute of
// otelcol_openhandscontrol_commands besides accepted and the nack reasons.
const (
	// outcomeDuplicate: a redelivery while the decision was pending.
	outcomeDuplicate = "duplicate"
	// outcomeReacked: a redelivery answered with the recorded ack.
	outcomeReacked = "reacked"
	// outcomeUnroutable: no registered receiver observes the session, so
	// no ack can be sequenced; the sender's window expires.
	outcomeUnroutable = "unroutable"
	// outcomeOverloaded: maxInFlight commands were already executing.
	outcomeOverloaded = "overloaded"
)

// telemetry holds the gate's internal metrics (README "Metrics").
type telemetry struct {
	commands     metric.Int64Counter
	acks         metric.Int64Counter
	writeLatency metric.Float64Histogram
	conflicts    metric.Int64Counter
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	b := telemetrydecl.New(set.MeterProvider.Meter(scopeName))
	var t telemetry
	t.commands = b.Int64Counter("otelcol_openhandscontrol_commands",
		"Commands handed to the gate, by type and outcome (accepted, a nack reason, or duplicate, reacked, unroutable, overloaded).", "{command}")
	t.acks = b.Int64Counter("otelcol_openhandscontrol_acks",
		"Acks emitted, by decision (accepted, rejected), nack reason, and whether it re-sent a recorded ack.", "{ack}")
	t.writeLatency = b.Float64Histogram("otelcol_openhandscontrol_write_latency",
		"Time from a REST write to the agent server's answer, by command type and status class (2xx, 4xx, 5xx, unreachable).", "s")
	t.conflicts = b.Int64Counter("otelcol_openhandscontrol_session_conflicts",
		"Commands refused because more than one observed conversation claims their session (the same id on several agent servers).", "{command}")
	return &t, b.Err()
}

func (t *telemetry) command(ctx context.Context, typ, outcome string) {
	t.commands.Add(ctx, 1, metric.WithAttributes(attribute.String("type", typ), attribute.String("outcome", outcome)))
}

// decided counts a command's ack, once, when it is first recorded.
func (t *telemetry) decided(ctx context.Context, typ string, d decision) {
	outcome := "accepted"
	if d.reason != "" {
		outcome = d.reason
	}
	t.command(ctx, typ, outcome)
	t.ack(ctx, d, false)
}

func (t *telemetry) ack(ctx context.Context, d decision, redelivery bool) {
	kind := "accepted"
	if d.reason != "" {
		kind = "rejected"
	}
	t.acks.Add(ctx, 1, metric.WithAttributes(attribute.String("decision", kind),
		attribute.String("reason", d.reason), attribute.Bool("redelivery", redelivery)))
}

func (t *telemetry) wrote(ctx context.Context, typ string, o writeOutcome, since time.Time) {
	class := "unreachable"
	if o.status != 0 {
		class = strconv.Itoa(o.status/100) + "xx"
	}
	t.writeLatency.Record(ctx, time.Since(since).Seconds(),
		metric.WithAttributes(attribute.String("type", typ), attribute.String("status_class", class)))
}
