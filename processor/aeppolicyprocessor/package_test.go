package aeppolicyprocessor

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl/telemetrydecltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestREADMEListsEveryMetric(t *testing.T) {
	telemetrydecltest.RequireREADMEMatches(t, "otelcol_aeppolicy_", newTelemetry)
}
