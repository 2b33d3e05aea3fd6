package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
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
	m := set.MeterProvider.Meter(scopeName)
	var t telemetry
	var errs [9]error
	t.eventsWritten, errs[0] = m.Int64Counter("otelcol_aepfile_events_written",
		metric.WithDescription("Events appended to a session log."), metric.WithUnit("{event}"))
	t.eventsDuplicate, errs[1] = m.Int64Counter("otelcol_aepfile_events_duplicate",
		metric.WithDescription("Redelivered events not written again: their (source, id) is already in the session log."), metric.WithUnit("{event}"))
	t.eventsSkipped, errs[2] = m.Int64Counter("otelcol_aepfile_events_skipped",
		metric.WithDescription("Log records skipped because they are not AEP events."), metric.WithUnit("{record}"))
	t.eventsRejected, errs[3] = m.Int64Counter("otelcol_aepfile_events_rejected",
		metric.WithDescription("AEP events never written because they cannot be rebuilt or are invalid, by reason."), metric.WithUnit("{event}"))
	t.writeErrors, errs[4] = m.Int64Counter("otelcol_aepfile_write_errors",
		metric.WithDescription("Failed file operations (open, write, fsync, close, compress, delete)."), metric.WithUnit("{error}"))
	_, errs[5] = m.Int64ObservableGauge("otelcol_aepfile_open_files",
		metric.WithDescription("Session logs held open (at most max_open_files)."), metric.WithUnit("{file}"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(openLogs()))
			return nil
		}))
	t.filesRotated, errs[6] = m.Int64Counter("otelcol_aepfile_files_rotated",
		metric.WithDescription("Session logs continued in a new segment because rotate_bytes was reached."), metric.WithUnit("{file}"))
	t.filesCompressed, errs[7] = m.Int64Counter("otelcol_aepfile_files_compressed",
		metric.WithDescription("Segments of ended sessions gzipped (compress_ended)."), metric.WithUnit("{file}"))
	t.filesDeleted, errs[8] = m.Int64Counter("otelcol_aepfile_files_deleted",
		metric.WithDescription("Files deleted because their log was untouched for max_age."), metric.WithUnit("{file}"))
	return &t, errors.Join(errs[:]...)
}

func (t *telemetry) rejected(ctx context.Context, reason string) {
	t.eventsRejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}
