package configchecktest // import "github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Load unmarshals the section id of the YAML file at path over cfg (a
// component's default configuration), as the collector would.
func Load(t testing.TB, path string, id component.ID, cfg component.Config) {
	t.Helper()
	cm, err := confmaptest.LoadConf(path)
	require.NoError(t, err)
	sub, err := cm.Sub(id.String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
}
