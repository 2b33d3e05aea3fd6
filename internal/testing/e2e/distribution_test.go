package e2e

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/kafkaexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/resourceprocessor"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"

	"github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"
)

// TestDistributionConfig loads and validates a configuration that uses each
// component the distribution adds beside the openhands receiver and the
// aeprelay exporter (builder-config.yaml): the aep connector, receiver,
// aepinbound processor behind the otlp receiver, aepfile exporter,
// contrib's prometheus and kafka exporters and the resource processor.
func TestDistributionConfig(t *testing.T) {
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol-openhands", Version: "e2e"},
		Factories: func() (otelcol.Factories, error) {
			f, err := factories()
			if err != nil {
				return f, err
			}
			f.Exporters[kafkaexporter.NewFactory().Type()] = kafkaexporter.NewFactory()
			f.Processors[resourceprocessor.NewFactory().Type()] = resourceprocessor.NewFactory()
			f.Exporters[aepfileexporter.NewFactory().Type()] = aepfileexporter.NewFactory()
			return f, nil
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				URIs:              []string{"file:testdata/distribution-config.yaml"},
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
			},
		},
		SkipSettingGRPCLogger: true,
	})
	require.NoError(t, err)
	require.NoError(t, col.DryRun(context.Background()))
}
