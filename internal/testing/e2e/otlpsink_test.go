package e2e

import (
	"testing"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrysink"
)

// startOTLPSink is the otlphttp exporter's destination: an OTLP/HTTP logs
// endpoint on loopback that keeps every record, stopped with the test.
func startOTLPSink(tb testing.TB) *telemetrysink.Logs {
	tb.Helper()
	s, err := telemetrysink.StartLogs(nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}
