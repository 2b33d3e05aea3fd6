package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"
)

const scopeName = "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

// telemetry holds the exporter's internal metrics (README "Metrics").
type telemetry struct {
	eventsWritten   metric.Int64Counter
	eventsDuplicate metric.Int64Counter
	eventsSkipped   metric.Int64Counter
	eventsRejected  metric.Int64Counter
	writeErrors     metric.Int64Counter
	filesRotated    metric.Int64Counter
	filesCompressed metric.Int64Counter
	filesDeleted    metric.Int64Counter
}

func newTelemetry(set component.TelemetrySettings, openLogs func() int) (*telemetry, error) {
	b := telemetrydecl.New(set.MeterProvider.Meter(scopeName))
	var t telemetry
	t.eventsWritten = b.Int64Counter("otelcol_aepfile_events_written",
		"Events appended to a session log.", "{event}")
	t.eventsDuplicate = b.Int64Counter("otelcol_aepfile_events_duplicate",
		"Redelivered events not written again: their (source, id) is already in the session log.", "{event}")
	t.eventsSkipped = b.Int64Counter("otelcol_aepfile_events_skipped",
		"Log records skipped because they are not AEP events.", "{record}")
	t.eventsRejected = b.Int64Counter("otelcol_aepfile_events_rejected",
		"AEP events never written because they cannot be rebuilt or are invalid, by reason.", "{event}")
	t.writeErrors = b.Int64Counter("otelcol_aepfile_write_errors",
		"Failed file operations (open, write, fsync, close, compress, delete).", "{error}")
	b.Int64ObservableGauge("otelcol_aepfile_open_files",
		"Session logs held open (at most max_open_files).", "{file}", func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(openLogs()))
			return nil
		})
	t.filesRotated = b.Int64Counter("otelcol_aepfile_files_rotated",
		"Session logs continued in a new segment because rotate_bytes was reached.", "{file}")
	t.filesCompressed = b.Int64Counter("otelcol_aepfile_files_compressed",
		"Segments of ended sessions gzipped (compress_ended).", "{file}")
	t.filesDeleted = b.Int64Counter("otelcol_aepfile_files_deleted",
		"Files deleted because their log was untouched for max_age.", "{file}")
	return &t, b.Err()
}

func (t *telemetry) rejected(ctx context.Context, reason string) {
	t.eventsRejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}
