package aepinboundprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
)

func loadConfig(t *testing.T, name string) *Config {
	return configchecktest.LoadTestdata[Config](t, component.NewIDWithName(componentType, name), createDefaultConfig)
}

func TestLoadConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		cfg := loadConfig(t, "")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, []string{"codex", "vscode"}, cfg.Vendors)
		assert.Equal(t, "companion", cfg.Mode)
		assert.Equal(t, aep.CaptureMetadata, cfg.Capture.Level)
		assert.Equal(t, "otelcol", cfg.SourceHost)
		assert.Equal(t, 10000, cfg.MaxSessions)
		assert.True(t, cfg.RedactPII)
		assert.Nil(t, cfg.Storage)
	})
	t.Run("primary", func(t *testing.T) {
		cfg := loadConfig(t, "primary")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, []string{"codex"}, cfg.Vendors)
		assert.Equal(t, "primary", cfg.Mode)
		assert.Equal(t, aep.CaptureRedacted, cfg.Capture.Level)
		assert.Equal(t, "collector-1.example.internal", cfg.SourceHost)
		assert.Equal(t, 50, cfg.MaxSessions)
		assert.Equal(t, component.MustNewID("file_storage"), *cfg.Storage)
	})
	t.Run("invalid", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "invalid"))
		require.Error(t, err)
		for _, msg := range []string{
			`vendors[1]: unknown vendor "claude"`, `vendors[2]: "codex" is listed twice`, "mode:",
			"capture.level:", "source_host:", "max_sessions:",
		} {
			assert.ErrorContains(t, err, msg)
		}
	})
	t.Run("no vendors", func(t *testing.T) {
		assert.ErrorContains(t, confmap.Validate(loadConfig(t, "novendors")), "vendors: at least one vendor")
	})
}
