package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// telemetry holds the receiver's internal metrics (README "Metrics").
type telemetry struct {
	attached        metric.Int64UpDownCounter
	vendorEvents    eventCounts // otelcol_openhands_vendor_events, by kind
	aepEvents       eventCounts // otelcol_openhands_aep_events, by type
	duplicates      metric.Int64Counter
	reconnects      metric.Int64Counter
	decodeErrors    metric.Int64Counter
	mappingDuration metric.Float64Histogram
	storageWritten  metric.Int64Counter
	storageErrors   metric.Int64Counter
	batchesResent   metric.Int64Counter
	restCatchUps    metric.Int64Counter
	overflowed      metric.Int64Gauge
	refused         metric.Int64Counter
	numbersAsText   metric.Int64Counter
	stalls          metric.Int64Counter
	skippedItems    metric.Int64Counter
	webhookRequests metric.Int64Counter
	targetTelemetry
	// frameBytesInFlight is what the frame budget has lent out.
	frameBytesInFlight atomic.Int64
	// serversUp is each server's last search outcome
	// (otelcol_openhands_server_up): 1 answered, 0 failed.
	serversMu sync.Mutex
	serversUp map[string]int64
	// obsrecv reports the collector's standard receiver metrics
	// (otelcol_receiver_accepted/refused_log_records) for what the
	// emitter hands to the pipeline.
	obsrecv *receiverhelper.ObsReport
}

// eventCounts counts events by the value of one attribute with an atomic
// add, and reports the counts to an observable counter when the meter
// collects: a synchronous counter's Add, per event, cost about as much as
// decoding the event. The values are a bounded set (known kinds, AEP
// types); past maxCountedValues (a server inventing kinds) new values
// count under "other".
type eventCounts struct {
	key     string
	mu      sync.RWMutex
	byValue map[string]*eventCount
}

type eventCount struct {
	n    atomic.Int64
	attr metric.ObserveOption
}

const maxCountedValues = 256

func (c *eventCounts) add(value string) {
	c.mu.RLock()
	n, ok := c.byValue[value]
	c.mu.RUnlock()
	if !ok {
		n = c.counter(value)
	}
	n.n.Add(1)
}

func (c *eventCounts) counter(value string) *eventCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byValue == nil {
		c.byValue = make(map[string]*eventCount)
	}
	if len(c.byValue) >= maxCountedValues {
		value = "other"
	}
	n, ok := c.byValue[value]
	if !ok {
		n = &eventCount{attr: metric.WithAttributeSet(attribute.NewSet(attribute.String(c.key, value)))}
		c.byValue[value] = n
	}
	return n
}

func (c *eventCounts) observe(_ context.Context, o metric.Int64Observer) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range c.byValue {
		o.Observe(n.n.Load(), n.attr)
	}
	return nil
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	b := telemetrydecl.New(set.MeterProvider.Meter(scopeName))
	t := telemetry{vendorEvents: eventCounts{key: "kind"}, aepEvents: eventCounts{key: "type"}, serversUp: make(map[string]int64)}
	t.attached = b.Int64UpDownCounter("otelcol_openhands_conversations_attached",
		"Conversations with an attached WebSocket.", "{conversation}")
	b.Int64ObservableCounter("otelcol_openhands_vendor_events",
		"Agent-server events received, by kind (duplicates included).", "{event}", t.vendorEvents.observe)
	b.Int64ObservableCounter("otelcol_openhands_aep_events",
		"AEP events emitted as log records, by type.", "{event}", t.aepEvents.observe)
	t.duplicates = b.Int64Counter("otelcol_openhands_duplicates_dropped",
		"Vendor events dropped because their id was already seen (replay overlap).", "{event}")
	t.reconnects = b.Int64Counter("otelcol_openhands_reconnects",
		"Socket re-attach attempts after a drop.", "{reconnect}")
	t.decodeErrors = b.Int64Counter("otelcol_openhands_decode_errors",
		"Frames, pages or events that could not be decoded, by cause.", "{error}")
	t.mappingDuration = b.Float64Histogram("otelcol_openhands_mapping_duration",
		"Time to map one vendor event to AEP events.", "s")
	t.storageWritten = b.Int64Counter("otelcol_openhands_storage_written",
		"Bytes of conversation state and write-ahead batches written to storage.", "By")
	t.storageErrors = b.Int64Counter("otelcol_openhands_storage_errors",
		"Storage reads and writes that failed (a write is retried; a conversation whose state cannot be read starts fresh).",
		"{error}")
	t.batchesResent = b.Int64Counter("otelcol_openhands_batches_resent",
		"Write-ahead batches sent again at start because they may not have left before a crash.", "{batch}")
	t.restCatchUps = b.Int64Counter("otelcol_openhands_rest_catchup_events",
		"Stored events read over REST after the session socket failed on an oversize frame, by outcome: mapped, or degraded to x.openhands.event.oversize.",
		"{event}")
	t.overflowed = b.Int64Gauge("otelcol_openhands_conversations_overflow",
		"Listed conversations waiting for a socket because max_conversations are attached, by server.", "{conversation}")
	t.refused = b.Int64Counter("otelcol_openhands_aep_events_refused",
		"Mapped AEP events the log record projection refused (a bug): dropped before taking a seq.", "{event}")
	t.numbersAsText = b.Int64Counter("otelcol_openhands_numbers_as_text",
		"Numbers in agent-server events beyond float64 range, carried as strings of their digits.", "{number}")
	t.stalls = b.Int64Counter("otelcol_openhands_socket_stalls",
		"Conversation sockets dropped and redialled because they stalled, by cause: keepalive (no pong), frame (a frame not received in time), behind_search (search shows the conversation moving past what the socket delivered).",
		"{socket}")
	b.Int64ObservableGauge("otelcol_openhands_frame_bytes_in_flight",
		"Frame bytes the conversation sockets hold of the receiver's frame budget (64 MiB): announced by frames being read or handled.",
		"By", func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.frameBytesInFlight.Load())
			return nil
		})
	t.skippedItems = b.Int64Counter("otelcol_openhands_search_items_skipped",
		"Conversation search items skipped, by server and reason: malformed (not a ConversationInfo) or id (not a conversation id of the server's form).",
		"{item}")
	b.Int64ObservableGauge("otelcol_openhands_server_up",
		"Whether the server's last conversation search answered (1) or failed, unreachable or refusing the key (0), by server.",
		"1", t.observeServersUp)
	t.webhookRequests = b.Int64Counter("otelcol_openhands_webhook_requests",
		"POSTs to the webhook sink, by server (\"\" when no server's key matched) and outcome: accepted, unauthorized, malformed, too_large, not_found.",
		"{request}")
	t.targetTelemetry = newTargetTelemetry(b)
	return &t, b.Err()
}

// searched records the outcome of a server's conversation search.
func (t *telemetry) searched(server string, answered bool) {
	up := int64(0)
	if answered {
		up = 1
	}
	t.serversMu.Lock()
	t.serversUp[server] = up
	t.serversMu.Unlock()
}

// forgetServer drops a retired target's otelcol_openhands_server_up: a
// fleet's sandboxes come and go by the thousand, and a killed one's last
// 0 would hold OpenHandsServerUnreachable firing for good.
func (t *telemetry) forgetServer(server string) {
	t.serversMu.Lock()
	delete(t.serversUp, server)
	t.serversMu.Unlock()
}

func (t *telemetry) observeServersUp(_ context.Context, o metric.Int64Observer) error {
	t.serversMu.Lock()
	defer t.serversMu.Unlock()
	for server, up := range t.serversUp {
		o.Observe(up, metric.WithAttributes(attribute.String("server", server)))
	}
	return nil
}

func (t *telemetry) webhookRequest(ctx context.Context, server, outcome string) {
	t.webhookRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("server", server), attribute.String("outcome", outcome)))
}

func (t *telemetry) stall(ctx context.Context, cause string) {
	t.stalls.Add(ctx, 1, metric.WithAttributes(attribute.String("cause", cause)))
}

func (t *telemetry) decodeError(ctx context.Context, cause string) {
	t.decodeErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("cause", cause)))
}

// vendorEvent counts one received event; kinds outside the known union
// count as "other" so that a server cannot blow up metric cardinality.
func (t *telemetry) vendorEvent(kind string) {
	if !mapping.KnownKind(kind) {
		kind = "other"
	}
	t.vendorEvents.add(kind)
}

func (t *telemetry) restCatchUp(ctx context.Context, outcome string) {
	t.restCatchUps.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

func (t *telemetry) overflow(ctx context.Context, server string, waiting int) {
	t.overflowed.Record(ctx, int64(waiting), metric.WithAttributes(attribute.String("server", server)))
}

func (t *telemetry) searchItemSkipped(ctx context.Context, server, reason string) {
	t.skippedItems.Add(ctx, 1, metric.WithAttributes(attribute.String("server", server), attribute.String("reason", reason)))
}

func (t *telemetry) aepEvent(eventType string) {
	t.aepEvents.add(eventType)
}

func (t *telemetry) mapped(ctx context.Context, d time.Duration) {
	t.mappingDuration.Record(ctx, d.Seconds())
}
