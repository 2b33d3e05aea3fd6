package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/otelcol"
)

// readmeYAML is the first yaml block of the README section under heading.
func readmeYAML(t *testing.T, path, heading string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	require.True(t, ok, "%s has no %q", path, heading)
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```yaml\n")
	require.True(t, ok, "%s: no yaml block under %q", path, heading)
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	return block
}

// TestREADMESecurityConfigLoads validates the README's production
// configuration with the distribution's components: with its credentials
// set it loads; with the OTLP token unset it is refused, as the README says.
func TestREADMESecurityConfigLoads(t *testing.T) {
	config := readmeYAML(t, "../../../README.md", "## Security: what each door trusts")
	for _, tc := range []struct {
		name    string
		unset   string
		wantErr string
	}{
		{name: "credentials set"},
		{name: "otlp token unset", unset: "OTLP_INGEST_TOKEN", wantErr: "bearertokenauth/otlp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"OTLP_INGEST_TOKEN", "AEP_INGEST_TOKEN", "OH_SESSION_API_KEY", "AEP_TOKEN"} {
				value := "secret-" + strings.ToLower(name)
				if name == tc.unset {
					value = ""
				}
				t.Setenv(name, value)
			}
			col, err := otelcol.NewCollector(otelcol.CollectorSettings{
				BuildInfo: component.BuildInfo{Command: "otelcol-openhands", Version: "e2e"},
				Factories: factories,
				ConfigProviderSettings: otelcol.ConfigProviderSettings{
					ResolverSettings: confmap.ResolverSettings{
						URIs:              []string{"yaml:" + config},
						ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory(), envprovider.NewFactory()},
					},
				},
				SkipSettingGRPCLogger: true,
			})
			require.NoError(t, err)
			err = col.DryRun(context.Background())
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
