// Package telemetrydecltest checks a component's README metrics table
// against the instruments the component registers.
package telemetrydecltest // import "github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl/telemetrydecltest"

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// instruments returns the instruments register creates on the settings'
// meter provider, in creation order.
func instruments(t testing.TB, register func(component.TelemetrySettings) error) []sdkmetric.Instrument {
	t.Helper()
	var registered []sdkmetric.Instrument
	// The SDK applies views when an instrument is created, whether or not
	// it ever records: a view that matches nothing sees every instrument.
	seen := func(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
		registered = append(registered, i)
		return sdkmetric.Stream{}, false
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()), sdkmetric.WithView(seen))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(t.Context())) })
	set := componenttest.NewNopTelemetrySettings()
	set.MeterProvider = provider
	require.NoError(t, register(set))
	return registered
}

// readmeMetrics returns the metric names in the metrics table of the
// README at path: the first cell of every row that starts with a
// backquoted name beginning with prefix, without its {attributes}.
func readmeMetrics(t testing.TB, path, prefix string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var names []string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		row, ok := strings.CutPrefix(lines.Text(), "| `"+prefix)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(prefix+row, "`")
		name, _, _ = strings.Cut(name, "{")
		names = append(names, name)
	}
	require.NoError(t, lines.Err())
	return names
}

// RequireREADMEMatches fails t unless the metrics table of the package's
// README.md (tests run in the package's directory) names exactly the
// instruments newTelemetry registers, each once.
func RequireREADMEMatches[T any](t testing.TB, prefix string, newTelemetry func(component.TelemetrySettings) (T, error)) {
	t.Helper()
	var registered []string
	for _, i := range instruments(t, func(set component.TelemetrySettings) error {
		_, err := newTelemetry(set)
		return err
	}) {
		registered = append(registered, i.Name)
	}
	documented := readmeMetrics(t, "README.md", prefix)
	slices.Sort(registered)
	slices.Sort(documented)
	require.NotEmpty(t, registered)
	require.Equal(t, registered, documented, "metrics registered (expected) against rows of the metrics table in README.md (actual)")
}
