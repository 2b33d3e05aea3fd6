package aepfileexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
)

func TestLoadConfig(t *testing.T) {
	configchecktest.LoadsAsExpected(t, filepath.Join("testdata", "config.yaml"), createDefaultConfig, []configchecktest.Expected[Config]{
		{
			ID:   component.NewID(componentType),
			Want: func(cfg *Config) { cfg.Directory = "/var/lib/otelcol/aep" },
		},
		{
			ID: component.NewIDWithName(componentType, "full"),
			Want: func(cfg *Config) {
				cfg.Directory = "/var/lib/otelcol/aep"
				cfg.FileMode, cfg.DirMode = "0640", "0750"
				cfg.Fsync = FsyncEveryBatch
				cfg.FsyncInterval = 5 * time.Second
				cfg.MaxOpenFiles = 64
				cfg.EndedGrace = 10 * time.Second
				cfg.DedupWindow = 256
				cfg.MaxCapture = aep.CaptureMetadata
				cfg.RotateBytes = 100 << 20
				cfg.MaxAge = 720 * time.Hour
				cfg.CompressEnded = true
				cfg.Timeout = 10 * time.Second
				queue := cfg.QueueConfig.Get()
				queue.QueueSize = 5000
				storage := component.MustNewID("file_storage")
				queue.StorageID = &storage
				cfg.RetryConfig.MaxElapsedTime = 0
			},
		},
	})
}

func TestDefaultConfigNeedsDirectory(t *testing.T) {
	err := confmap.Validate(NewFactory().CreateDefaultConfig())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "directory: must not be empty")
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"file_mode_decimal", func(c *Config) { c.FileMode = "0689" }, `file_mode: must be an octal permission such as "0600", got "0689"`},
		{"dir_mode_too_wide", func(c *Config) { c.DirMode = "01777" }, `dir_mode: must be an octal permission`},
		{"fsync_unknown", func(c *Config) { c.Fsync = "always" }, `fsync: must be "none", "interval" or "every_batch", got "always"`},
		{"fsync_interval_zero", func(c *Config) { c.FsyncInterval = 0 }, "fsync_interval: must be positive with fsync: interval"},
		{"max_open_files_zero", func(c *Config) { c.MaxOpenFiles = 0 }, "max_open_files: must be at least 1, got 0"},
		{"ended_grace_negative", func(c *Config) { c.EndedGrace = -time.Second }, "ended_grace: must not be negative"},
		{"dedup_window_negative", func(c *Config) { c.DedupWindow = -1 }, "dedup_window: must not be negative, got -1"},
		{"rotate_bytes_negative", func(c *Config) { c.RotateBytes = -1 }, "rotate_bytes: must not be negative, got -1"},
		{"max_age_negative", func(c *Config) { c.MaxAge = -time.Hour }, "max_age: must not be negative"},
		{"max_capture_unknown", func(c *Config) { c.MaxCapture = "secret" }, `max_capture: unknown level "secret"`},
		{"timeout_zero", func(c *Config) { c.Timeout = 0 }, "timeout: must be positive"},
		{"num_consumers_zero", func(c *Config) { c.QueueConfig.Get().NumConsumers = 0 }, "sending_queue: `num_consumers` must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Directory = "/var/lib/otelcol/aep"
			require.NoError(t, confmap.Validate(cfg), "the base config must be valid")
			tt.mutate(cfg)
			err := confmap.Validate(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestConfigValidateRejectsEveryNegativeDuration sets each duration of the
// configuration negative in turn: the code reading a negative grace, age
// or timeout takes it as none.
func TestConfigValidateRejectsEveryNegativeDuration(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = "/var/lib/otelcol/aep"
	assert.Subset(t, configchecktest.RejectsNegativeDurations(t, cfg), []string{"ended_grace", "max_age", "timeout"})
}
