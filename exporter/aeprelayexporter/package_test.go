package aeprelayexporter

import (
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/goleak"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl/telemetrydecltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestREADMEListsEveryMetric(t *testing.T) {
	telemetrydecltest.RequireREADMEMatches(t, "otelcol_aeprelay_", func(set component.TelemetrySettings) (*telemetry, error) {
		return newTelemetry(set, TransportWebSocket)
	})
}
