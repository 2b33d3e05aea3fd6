package controlcheck

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
)

// resolve resolves a configuration file through the converter, as the
// collector does before `validate` or a start.
func resolve(t *testing.T, yaml string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:               []string{"file:" + path},
		ProviderFactories:  []confmap.ProviderFactory{fileprovider.NewFactory()},
		ConverterFactories: []confmap.ConverterFactory{NewFactory()},
	})
	require.NoError(t, err)
	_, err = resolver.Resolve(context.Background())
	return err
}

const components = `
extensions:
  openhandscontrol:
    enabled: true
  openhandscontrol/other:
receivers:
  openhands:
    control: openhandscontrol
  openhands/b:
    control: openhandscontrol/other
  otlp:
    control: openhandscontrol/other
exporters:
  aeprelay:
    control: openhandscontrol
  debug:
`

func TestConvert(t *testing.T) {
	for _, tc := range []struct {
		name    string
		service string
		want    []string
	}{
		{"every control extension listed", "service:\n  extensions: [openhandscontrol, openhandscontrol/other]\n", nil},
		{"none listed", "service:\n  extensions: []\n", []string{
			`receivers::openhands::control: extension "openhandscontrol" is not in service::extensions`,
			`receivers::openhands/b::control: extension "openhandscontrol/other" is not in service::extensions`,
			`exporters::aeprelay::control: extension "openhandscontrol" is not in service::extensions`,
		}},
		{"no service section", "", []string{`receivers::openhands::control`}},
		{"one missing", "service:\n  extensions: [openhandscontrol]\n", []string{
			`receivers::openhands/b::control: extension "openhandscontrol/other" is not in service::extensions`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := resolve(t, components+tc.service)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
			assert.NotContains(t, err.Error(), "otlp", "other components' control keys are theirs")
		})
	}
}

func TestConvertLeavesConfigurationsWithoutControlAlone(t *testing.T) {
	assert.NoError(t, resolve(t, "receivers:\n  openhands:\n    servers: [{endpoint: http://127.0.0.1:8000}]\n"))
}
