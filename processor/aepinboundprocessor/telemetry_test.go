package aepinboundprocessor

import (
	"testing"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl/telemetrydecltest"
)

func TestREADMEListsEveryMetric(t *testing.T) {
	telemetrydecltest.RequireREADMEMatches(t, "README.md", "otelcol_aepinbound_", func(set component.TelemetrySettings) error {
		_, err := newTelemetry(set)
		return err
	})
}
