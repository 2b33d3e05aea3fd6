package aepreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
)

// Why an event was not passed on (otelcol_aepreceiver_events_refused).
const (
	reasonInvalid      = "invalid"      // fails the envelope or payload schema, or cannot be projected
	reasonCapture      = "capture"      // data above its declared capture
	reasonCommand      = "command"      // a control command: never taken over HTTP POST
	reasonAgent        = "agent"        // an agent outside agents (403)
	reasonVersion      = "version"      // a JSONL line of another AEP version
	reasonTooLarge     = "too_large"    // a JSONL line over max_request_body_size
	reasonBatch        = "batch"        // valid, in a batch refused for another event
	reasonBackpressure = "backpressure" // the pipeline refused for now (503)
	reasonPipeline     = "pipeline"     // the pipeline refused for good
)

// Why a request was refused before its events were read
// (otelcol_aepreceiver_requests_refused).
const (
	requestVersion       = "version"         // no AEP-Version 0.1 (426)
	requestContentType   = "content_type"    // not JSON or NDJSON (415)
	requestTooLarge      = "too_large"       // body over max_request_body_size (413)
	requestTooManyEvents = "too_many_events" // batch over max_batch_events (413)
	requestUnreadable    = "unreadable"      // the body could not be read
)

// telemetry holds the receiver's own metrics (README "Metrics").
type telemetry struct {
	accepted       metric.Int64Counter
	refused        metric.Int64Counter
	downlevelled   metric.Int64Counter
	requestRefused metric.Int64Counter
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	b := telemetrydecl.New(set.MeterProvider.Meter(scopeName))
	var t telemetry
	t.accepted = b.Int64Counter("otelcol_aepreceiver_events_accepted",
		"AEP events validated and handed to the pipeline (redeliveries included).", "{event}")
	t.refused = b.Int64Counter("otelcol_aepreceiver_events_refused",
		"AEP events refused to the sender and not passed on, by reason: invalid, capture, command, agent, batch, backpressure, pipeline; from JSONL also version, too_large.", "{event}")
	t.downlevelled = b.Int64Counter("otelcol_aepreceiver_events_downlevelled",
		"AEP events above the capture ceiling, passed on down-levelled.", "{event}")
	t.requestRefused = b.Int64Counter("otelcol_aepreceiver_requests_refused",
		"POST requests refused before their events were read, by reason: version, content_type, too_large, too_many_events, unreadable.", "{request}")
	return &t, b.Err()
}

func (t *telemetry) eventsRefused(ctx context.Context, reason string, n int) {
	if n > 0 {
		t.refused.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", reason)))
	}
}

func (t *telemetry) requestRefusedFor(ctx context.Context, reason string) {
	t.requestRefused.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}
