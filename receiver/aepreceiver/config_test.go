package aepreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
)

// loadConfig loads one instance of testdata/config.yaml the way the
// collector does.
func loadConfig(t *testing.T, name string) *Config {
	return configchecktest.LoadTestdata[Config](t, component.NewIDWithName(componentType, name), createDefaultConfig)
}

func TestLoadConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		cfg := loadConfig(t, "")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, "localhost:8788", cfg.NetAddr.Endpoint)
		assert.Equal(t, aep.CaptureMetadata, cfg.Capture.Level)
		assert.Empty(t, cfg.Capture.Categories)
		assert.Equal(t, 10_000, cfg.MaxBatchEvents)
		assert.Empty(t, cfg.Agents, "any agent")
		assert.Equal(t, JSONLConfig{PollInterval: time.Second}, cfg.JSONL, "no tailing")
		assert.False(t, cfg.Auth.HasValue())
		assert.Zero(t, cfg.MaxRequestBodySize, "confighttp's default, 20 MiB")
	})

	t.Run("full", func(t *testing.T) {
		cfg := loadConfig(t, "full")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, "0.0.0.0:9443", cfg.NetAddr.Endpoint)
		require.True(t, cfg.TLS.HasValue())
		assert.Equal(t, "/etc/otelcol/aep.crt", cfg.TLS.Get().CertFile)
		require.True(t, cfg.Auth.HasValue())
		assert.Equal(t, component.MustNewID("bearertokenauth"), cfg.Auth.Get().Config.AuthenticatorID)
		assert.Equal(t, int64(4194304), cfg.MaxRequestBodySize)
		assert.Equal(t, 500, cfg.MaxBatchEvents)
		assert.Equal(t, []string{"claude-code", "codex"}, cfg.Agents)
		storageID := component.MustNewID("file_storage")
		assert.Equal(t, JSONLConfig{Directory: "/var/log/aep", PollInterval: 500 * time.Millisecond, Storage: &storageID}, cfg.JSONL)
		assert.Equal(t, map[string]aep.Capture{"attention": aep.CaptureRedacted}, cfg.Capture.Categories)
	})

	t.Run("invalid", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "invalid"))
		require.Error(t, err)
		for _, want := range []string{
			"endpoint: must not be empty",
			"read_timeout: ",
			"max_batch_events: must be at least 1",
			"agents[0]: must not be empty",
			"jsonl.poll_interval: ",
			"jsonl.storage: set only with jsonl.directory",
			`capture.level: unknown level "everything"`,
			`capture.categories: unknown category "tools"`,
			`capture.categories.run: unknown level "verbatim"`,
		} {
			assert.ErrorContains(t, err, want)
		}
	})
}

func TestConfigRejectsNegativeDurations(t *testing.T) {
	keys := configchecktest.RejectsNegativeDurations(t, createDefaultConfig())
	assert.Contains(t, keys, "write_timeout")
}

func TestCeiling(t *testing.T) {
	c := CaptureConfig{Level: aep.CaptureMetadata, Categories: map[string]aep.Capture{"attention": aep.CaptureRedacted, "x": aep.CaptureNone}}
	tests := []struct {
		eventType string
		want      aep.Capture
	}{
		{"tool.requested", aep.CaptureMetadata},
		{"attention.requested", aep.CaptureRedacted},
		{"x.acme.note.added", aep.CaptureNone},
		{"agent.presence", aep.CaptureMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.eventType, func(t *testing.T) {
			assert.Equal(t, tt.want, c.ceiling(tt.eventType))
		})
	}
	assert.Equal(t, aep.CaptureRedacted, c.highest())
}
