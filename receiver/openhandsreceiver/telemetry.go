package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// telemetry holds the receiver's internal metrics (README "Metrics").
type telemetry struct {
	attached        metric.Int64UpDownCounter
	vendorEvents    metric.Int64Counter
	aepEvents       metric.Int64Counter
	duplicates      metric.Int64Counter
	reconnects      metric.Int64Counter
	decodeErrors    metric.Int64Counter
	mappingDuration metric.Float64Histogram
	storageWritten  metric.Int64Counter
	storageErrors   metric.Int64Counter
	batchesResent   metric.Int64Counter
	restCatchUps    metric.Int64Counter
	overflowed      metric.Int64Gauge
	// kinds and types are the per-event attributes, built once per value.
	kinds, types attributeOptions
}

// attributeOptions holds the measurement option of each value of one
// attribute: an event counted by kind or type would otherwise build, sort
// and hash an attribute set per event. Past maxCachedValues (a server
// inventing kinds) options are built per call instead.
type attributeOptions struct {
	key    string
	mu     sync.RWMutex
	byName map[string]metric.MeasurementOption
}

const maxCachedValues = 256

func (a *attributeOptions) of(value string) metric.MeasurementOption {
	a.mu.RLock()
	opt, ok := a.byName[value]
	a.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(attribute.String(a.key, value)))
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byName == nil {
		a.byName = make(map[string]metric.MeasurementOption)
	}
	if len(a.byName) < maxCachedValues {
		a.byName[value] = opt
	}
	return opt
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	m := set.MeterProvider.Meter(scopeName)
	t := telemetry{kinds: attributeOptions{key: "kind"}, types: attributeOptions{key: "type"}}
	var errs [12]error
	t.attached, errs[0] = m.Int64UpDownCounter("otelcol_openhands_conversations_attached",
		metric.WithDescription("Conversations with an attached WebSocket."), metric.WithUnit("{conversation}"))
	t.vendorEvents, errs[1] = m.Int64Counter("otelcol_openhands_vendor_events",
		metric.WithDescription("Agent-server events received, by kind (duplicates included)."), metric.WithUnit("{event}"))
	t.aepEvents, errs[2] = m.Int64Counter("otelcol_openhands_aep_events",
		metric.WithDescription("AEP events emitted as log records, by type."), metric.WithUnit("{event}"))
	t.duplicates, errs[3] = m.Int64Counter("otelcol_openhands_duplicates_dropped",
		metric.WithDescription("Vendor events dropped because their id was already seen (replay overlap)."), metric.WithUnit("{event}"))
	t.reconnects, errs[4] = m.Int64Counter("otelcol_openhands_reconnects",
		metric.WithDescription("Socket re-attach attempts after a drop."), metric.WithUnit("{reconnect}"))
	t.decodeErrors, errs[5] = m.Int64Counter("otelcol_openhands_decode_errors",
		metric.WithDescription("Frames, pages or events that could not be decoded, by cause."), metric.WithUnit("{error}"))
	t.mappingDuration, errs[6] = m.Float64Histogram("otelcol_openhands_mapping_duration",
		metric.WithDescription("Time to map one vendor event to AEP events."), metric.WithUnit("s"))
	t.storageWritten, errs[7] = m.Int64Counter("otelcol_openhands_storage_written",
		metric.WithDescription("Bytes of conversation state and write-ahead batches written to storage."), metric.WithUnit("By"))
	t.storageErrors, errs[8] = m.Int64Counter("otelcol_openhands_storage_errors",
		metric.WithDescription("Storage reads and writes that failed (a write is retried; a conversation whose state cannot be read starts fresh)."),
		metric.WithUnit("{error}"))
	t.batchesResent, errs[9] = m.Int64Counter("otelcol_openhands_batches_resent",
		metric.WithDescription("Write-ahead batches sent again at start because they may not have left before a crash."),
		metric.WithUnit("{batch}"))
	t.restCatchUps, errs[10] = m.Int64Counter("otelcol_openhands_rest_catchup_events",
		metric.WithDescription("Stored events read over REST after the session socket failed on an oversize frame, by outcome: mapped, or degraded to x.openhands.event.oversize."),
		metric.WithUnit("{event}"))
	t.overflowed, errs[11] = m.Int64Gauge("otelcol_openhands_conversations_overflow",
		metric.WithDescription("Listed conversations waiting for a socket because max_conversations are attached, by server."),
		metric.WithUnit("{conversation}"))
	return &t, errors.Join(errs[:]...)
}

func (t *telemetry) decodeError(ctx context.Context, cause string) {
	t.decodeErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("cause", cause)))
}

// vendorEvent counts one received event; kinds outside the known union
// count as "other" so that a server cannot blow up metric cardinality.
func (t *telemetry) vendorEvent(ctx context.Context, kind string) {
	if !mapping.KnownKind(kind) {
		kind = "other"
	}
	t.vendorEvents.Add(ctx, 1, t.kinds.of(kind))
}

func (t *telemetry) restCatchUp(ctx context.Context, outcome string) {
	t.restCatchUps.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

func (t *telemetry) overflow(ctx context.Context, server string, waiting int) {
	t.overflowed.Record(ctx, int64(waiting), metric.WithAttributes(attribute.String("server", server)))
}

func (t *telemetry) aepEvent(ctx context.Context, eventType string) {
	t.aepEvents.Add(ctx, 1, t.types.of(eventType))
}

func (t *telemetry) mapped(ctx context.Context, d time.Duration) {
	t.mappingDuration.Record(ctx, d.Seconds())
}
