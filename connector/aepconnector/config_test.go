package aepconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
)

func loadConfig(t *testing.T, name string) *Config {
	return configchecktest.LoadTestdata[Config](t, component.NewIDWithName(componentType, name), createDefaultConfig)
}

func TestLoadConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		cfg := loadConfig(t, "")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, 10000, cfg.OpenSpans.MaxEntries)
		assert.Equal(t, time.Hour, cfg.OpenSpans.TTL)
		assert.Equal(t, 2000, cfg.MaxSeries)
	})
	t.Run("bounded", func(t *testing.T) {
		cfg := loadConfig(t, "bounded")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, OpenSpansConfig{MaxEntries: 500, TTL: 10 * time.Minute}, cfg.OpenSpans)
		assert.Equal(t, 100, cfg.MaxSeries)
	})
	t.Run("prices", func(t *testing.T) {
		cfg := loadConfig(t, "prices")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, usage.Prices{
			"gpt-5-codex": {Input: 1.25, CachedInput: ptr(0.125), Output: 10},
			"gpt-5.2":     {Input: 1.75, Output: 14},
		}, cfg.Prices)
	})
	t.Run("bad prices", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "badprices"))
		for _, key := range []string{"prices: a model name must not be empty", `prices["gpt-5.2"].input`, `prices["gpt-5.2"].cached_input`, `prices["gpt-5.2"].output`} {
			assert.ErrorContains(t, err, key)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "invalid"))
		require.Error(t, err)
		for _, key := range []string{"open_spans.max_entries", "open_spans.ttl", "max_series"} {
			assert.ErrorContains(t, err, key)
		}
	})
}

func TestValidateRejectsEveryNegativeDuration(t *testing.T) {
	keys := configchecktest.RejectsNegativeDurations(t, createDefaultConfig())
	assert.Equal(t, []string{"open_spans.ttl"}, keys)
}
