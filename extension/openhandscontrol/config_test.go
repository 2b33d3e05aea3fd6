package openhandscontrol

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
)

func TestLoadConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    func(*Config)
		wantErr string
	}{
		{name: "", want: func(*Config) {}},
		{name: "on", want: func(c *Config) { c.Enabled = true }},
		{name: "tuned", want: func(c *Config) {
			c.Enabled, c.AckWindow, c.ReplyGuard, c.SendInputMaxChars = true, 5*time.Second, 3*time.Second, 1000
			c.ConversationRateLimit = RateLimit{WritesPerSecond: 0.5, Burst: 3}
		}},
		{name: "guard_outside_window", wantErr: "reply_guard: must be shorter than ack_window (5s)"},
		{name: "no_rate", wantErr: "conversation_rate_limit.writes_per_second: must be a positive number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			configchecktest.Load(t, filepath.Join("testdata", "config.yaml"), component.NewIDWithName(componentType, tc.name), cfg)
			err := confmap.Validate(cfg)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			want := createDefaultConfig().(*Config)
			tc.want(want)
			assert.Equal(t, want, cfg)
		})
	}
}

func TestDefaultConfigIsClosed(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.Validate())
	assert.False(t, cfg.Enabled, "the gate is opt-in")
	assert.Equal(t, 10*time.Second, cfg.AckWindow)
	assert.Equal(t, 8*time.Second, cfg.ReplyGuard)
	assert.Equal(t, 4000, cfg.SendInputMaxChars)
	assert.Equal(t, RateLimit{WritesPerSecond: 1, Burst: 10}, cfg.ConversationRateLimit)
}

func TestValidateNamesTheKey(t *testing.T) {
	cfg := &Config{}
	err := cfg.Validate()
	for _, key := range []string{"ack_window: must be positive", "reply_guard: must be positive", "send_input_max_chars: must be positive",
		"conversation_rate_limit.writes_per_second: must be a positive number", "conversation_rate_limit.burst: must be positive"} {
		assert.ErrorContains(t, err, key)
	}
	for _, wps := range []float64{math.NaN(), math.Inf(1), -1} {
		cfg := createDefaultConfig().(*Config)
		cfg.ConversationRateLimit.WritesPerSecond = wps
		assert.ErrorContains(t, cfg.Validate(), "conversation_rate_limit.writes_per_second: must be a positive number", "%v", wps)
	}
}

func TestValidateRejectsEveryNegativeDuration(t *testing.T) {
	keys := configchecktest.RejectsNegativeDurations(t, createDefaultConfig())
	assert.ElementsMatch(t, []string{"ack_window", "reply_guard"}, keys)
}
