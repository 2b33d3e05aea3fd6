package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
)

const scopeName = "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

// Outcomes of an inbound command: the outcome attribute of
// otelcol_aeprelay_commands_received.
const (
	commandHandled   = "handled"
	commandUnhandled = "unhandled"
	commandInvalid   = "invalid"
)

// telemetry holds the exporter's internal metrics (README "Metrics").
type telemetry struct {
	eventsSent       metric.Int64Counter
	batchesConfirmed metric.Int64Counter
	confirmLatency   metric.Float64Histogram
	reconnects       metric.Int64Counter
	eventsSkipped    metric.Int64Counter
	eventsRejected   metric.Int64Counter
	commandsReceived metric.Int64Counter
	commandsRefused  metric.Int64Counter
	unmatchedErrors  metric.Int64Counter
	authRefusals     metric.Int64Counter
	linksOpen        metric.Int64UpDownCounter
	linksEvicted     metric.Int64Counter
	transport        metric.MeasurementOption
}

func newTelemetry(set component.TelemetrySettings, transport Transport) (*telemetry, error) {
	b := telemetrydecl.New(set.MeterProvider.Meter(scopeName))
	t := telemetry{transport: metric.WithAttributes(attribute.String("transport", string(transport)))}
	t.eventsSent = b.Int64Counter("otelcol_aeprelay_events_sent",
		"Events the relay accepted: confirmed by a pong or an HTTP 2xx, less those it refused.", "{event}")
	t.batchesConfirmed = b.Int64Counter("otelcol_aeprelay_batches_confirmed",
		"Batches the relay confirmed (WebSocket pong or HTTP 202).", "{batch}")
	t.confirmLatency = b.Float64Histogram("otelcol_aeprelay_confirm_latency",
		"Time from writing a batch to the relay's confirmation.", "s")
	t.reconnects = b.Int64Counter("otelcol_aeprelay_reconnects",
		"WebSocket redial attempts after a failed dial or a lost connection.", "{reconnect}")
	t.eventsSkipped = b.Int64Counter("otelcol_aeprelay_events_skipped",
		"Log records skipped because they are not AEP events.", "{record}")
	t.eventsRejected = b.Int64Counter("otelcol_aeprelay_events_rejected",
		"AEP events dropped as permanently unsendable, by reason and, when the relay refused them, its code.", "{event}")
	t.commandsReceived = b.Int64Counter("otelcol_aeprelay_commands_received",
		"Control commands the relay routed to this connection, by outcome.", "{command}")
	t.commandsRefused = b.Int64Counter("otelcol_aeprelay_commands_refused",
		"Commands this exporter refused to send: an emitter never sends commands, whatever receiver produced the record.", "{command}")
	t.unmatchedErrors = b.Int64Counter("otelcol_aeprelay_unmatched_errors",
		"Relay error frames whose cause names none of our unconfirmed events, by code.", "{frame}")
	t.authRefusals = b.Int64Counter("otelcol_aeprelay_auth_refused",
		"Dials and POSTs the relay refused for their credentials (HTTP 401 or 403); each is retried.", "{refusal}")
	t.linksOpen = b.Int64UpDownCounter("otelcol_aeprelay_links",
		"WebSocket links open to the relay, one per agent identity.", "{link}")
	t.linksEvicted = b.Int64Counter("otelcol_aeprelay_links_evicted",
		"Links of other agents closed at max_links to open one for a new agent.", "{link}")
	return &t, b.Err()
}

func (t *telemetry) sent(ctx context.Context, events int) {
	t.eventsSent.Add(ctx, int64(events), t.transport)
}

func (t *telemetry) confirmed(ctx context.Context, since time.Time) {
	t.batchesConfirmed.Add(ctx, 1, t.transport)
	t.confirmLatency.Record(ctx, time.Since(since).Seconds(), t.transport)
}

// rejected counts one dropped event; code is the relay's, "" when this
// exporter refused the event itself.
func (t *telemetry) rejected(ctx context.Context, reason, code string) {
	attrs := []attribute.KeyValue{attribute.String("reason", reason)}
	if code != "" {
		attrs = append(attrs, attribute.String("code", code))
	}
	t.eventsRejected.Add(ctx, 1, metric.WithAttributes(attrs...))
}

func (t *telemetry) authRefused(ctx context.Context, statusCode int) {
	t.authRefusals.Add(ctx, 1, t.transport, metric.WithAttributes(attribute.Int("status_code", statusCode)))
}

func (t *telemetry) unmatchedError(ctx context.Context, code string) {
	t.unmatchedErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("code", code)))
}

func (t *telemetry) commandRefused(ctx context.Context) {
	t.commandsRefused.Add(ctx, 1, t.transport)
}

func (t *telemetry) command(ctx context.Context, outcome string) {
	t.commandsReceived.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}
