package aeppolicyprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor/internal/policy"
)

func loadConfig(t *testing.T, name string) *Config {
	return configchecktest.LoadTestdata[Config](t, component.NewIDWithName(componentType, name), createDefaultConfig)
}

func TestLoadConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		cfg := loadConfig(t, "")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, policy.Rules{RepeatedTool: 5, RepeatWindow: 10 * time.Minute, RepeatedError: 5, StuckAfter: 10 * time.Minute},
			cfg.policies().Default, "loops and stuck runs on, budgets off")
		assert.Equal(t, "aeppolicy", cfg.SourceHost)
		assert.Nil(t, cfg.Storage)
	})
	t.Run("full", func(t *testing.T) {
		cfg := loadConfig(t, "full")
		require.NoError(t, confmap.Validate(cfg))
		p := cfg.policies()
		assert.Equal(t, policy.Rules{
			Session: policy.Budget{
				CostUSD: policy.Limit{Soft: 5, Hard: 20}, Tokens: policy.Limit{Hard: 2000000},
				WallTimeSeconds: policy.Limit{Soft: 1800, Hard: 7200},
			},
			Agent:        policy.Budget{CostUSD: policy.Limit{Soft: 100, Hard: 200}},
			Window:       24 * time.Hour,
			RepeatedTool: 4, RepeatWindow: 5 * time.Minute, RepeatedError: 3,
			StuckAfter: 5 * time.Minute, LongRunningTools: []string{"execute_bash"}, LongRunningAfter: time.Hour,
		}, p.Default)
		assert.Equal(t, policy.Rules{Session: policy.Budget{CostUSD: policy.Limit{Hard: 10}}}, p.Agents["codex"],
			"an agent's entry replaces the default as a whole")
		assert.InDelta(t, 0.125, *p.Prices["gpt-5-codex"].CachedInput, 1e-9)
		assert.Equal(t, component.MustNewID("file_storage"), *cfg.Storage)
	})
	t.Run("invalid", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "invalid"))
		require.Error(t, err)
		for _, msg := range []string{
			"default.session.cost_usd.soft: must be below hard", "default.session.tokens.soft: must be a non-negative number",
			"default.session.wall_time.soft: must not be negative", "default.agent.window: must be positive",
			"default.loop.repeated_tool:", "default.loop.repeated_error:", "default.stuck.long_running_tools[0]:",
			"agents: an agent name must not be empty", `agents[""].loop.repeated_tool:`,
			`prices["m"].input`, "source_host:", "check_interval:", "max_sessions:",
		} {
			assert.ErrorContains(t, err, msg)
		}
	})
	t.Run("pause", func(t *testing.T) {
		cfg := loadConfig(t, "pause")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, actionPause, cfg.rulesOf("codex").Action)
		assert.Equal(t, component.MustNewID("openhandscontrol"), *cfg.Control)
	})
	t.Run("pause without a gate", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "pausewithoutgate"))
		assert.ErrorContains(t, err, `default.action: must be empty or pause, got "halt"`)
		assert.ErrorContains(t, err, "control: an openhandscontrol extension is required")
	})
	t.Run("negative durations", func(t *testing.T) {
		configchecktest.RejectsNegativeDurations(t, loadConfig(t, "full"))
	})
}
