package aeptest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
)

// LogsOf projects events onto log records of one openhands resource and
// scope, in order: what the openhands receiver hands an exporter.
func LogsOf(tb testing.TB, events ...*aep.Event) plog.Logs {
	tb.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	projection.SetResource(rl.Resource(), "openhands")
	records := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, ev := range events {
		require.NoError(tb, projection.ToLogRecord(ev, records.AppendEmpty(), projection.Options{}))
	}
	return ld
}

// EventsOf decodes every log record of logs back to its AEP event, in
// order, requiring each to be one: the inverse of LogsOf.
func EventsOf(tb testing.TB, logs ...plog.Logs) []*aep.Event {
	tb.Helper()
	var events []*aep.Event
	for _, ld := range logs {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					ev, err := projection.FromLogRecord(lr, rl.Resource())
					require.NoError(tb, err)
					events = append(events, ev)
				}
			}
		}
	}
	return events
}
