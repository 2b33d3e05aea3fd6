package configchecktest // import "github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
)

// Load unmarshals the section id of the YAML file at path over cfg (a
// component's default configuration), as the collector would: ${env:...}
// references resolved.
func Load(t testing.TB, path string, id component.ID, cfg component.Config) {
	t.Helper()
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"file:" + path},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
	})
	require.NoError(t, err)
	cm, err := resolver.Resolve(context.Background())
	require.NoError(t, err)
	sub, err := cm.Sub(id.String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
}

// LoadTestdata loads the section id of the package's
// testdata/config.yaml over a new default configuration, as Load does.
func LoadTestdata[C any](t testing.TB, id component.ID, newDefault func() component.Config) *C {
	t.Helper()
	cfg := newDefault().(*C)
	Load(t, filepath.Join("testdata", "config.yaml"), id, cfg)
	return cfg
}

// Expected is one section of a test configuration file and what loading it
// changes in the default configuration.
type Expected[C any] struct {
	ID   component.ID
	Want func(*C)
}

// LoadsAsExpected loads each section of the YAML file at path over a fresh
// default configuration, in a subtest named after the section, and
// requires the result valid and equal to the default changed by Want.
func LoadsAsExpected[C any](t *testing.T, path string, newDefault func() component.Config, sections []Expected[C]) {
	t.Helper()
	for _, s := range sections {
		t.Run(s.ID.String(), func(t *testing.T) {
			got := newDefault()
			Load(t, path, s.ID, got)
			require.NoError(t, confmap.Validate(got))
			want := newDefault().(*C)
			s.Want(want)
			assert.Equal(t, want, got)
		})
	}
}
