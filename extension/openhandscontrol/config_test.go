package openhandscontrol

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		want    func(*Config)
		wantErr string
	}{
		{name: "", want: func(*Config) {}},
		{name: "on", want: func(c *Config) { c.Enabled = true }},
		{name: "tuned", want: func(c *Config) {
			c.Enabled, c.AckWindow, c.ReplyGuard, c.SendInputMaxChars = true, 5*time.Second, 3*time.Second, 1000
		}},
		{name: "guard_outside_window", wantErr: "reply_guard: must be shorter than ack_window (5s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := component.NewIDWithName(componentType, tc.name)
			sub, err := cm.Sub(id.String())
			require.NoError(t, err)
			cfg := createDefaultConfig().(*Config)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
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
}

func TestValidateNamesTheKey(t *testing.T) {
	cfg := &Config{}
	err := cfg.Validate()
	for _, key := range []string{"ack_window: must be positive", "reply_guard: must be positive", "send_input_max_chars: must be positive"} {
		assert.ErrorContains(t, err, key)
	}
}

func TestValidateRejectsEveryNegativeDuration(t *testing.T) {
	keys := configchecktest.RejectsNegativeDurations(t, createDefaultConfig())
	assert.ElementsMatch(t, []string{"ack_window", "reply_guard"}, keys)
}
