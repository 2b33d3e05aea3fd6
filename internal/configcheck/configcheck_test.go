package configcheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/config/confighttp"
)

func TestCheck(t *testing.T) {
	errs := Check(
		Duration{Key: "a", Value: time.Second},
		Duration{Key: "b", Value: 0},
		Duration{Key: "c", Value: -time.Second},
		Duration{Key: "d", Value: 0, Positive: true},
		Duration{Key: "e", Value: -5 * time.Second, Positive: true},
	)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	assert.Equal(t, []string{
		"c: must not be negative, got -1s",
		"d: must be positive, got 0s",
		"e: must be positive, got -5s",
	}, got)
}

func TestWalkDurations(t *testing.T) {
	type inner struct {
		Wait time.Duration `mapstructure:"wait"`
	}
	type server struct {
		confighttp.ClientConfig `mapstructure:",squash"`
		Inner                   *inner `mapstructure:"inner"`
	}
	cfg := struct {
		Servers []server      `mapstructure:"servers"`
		Poll    time.Duration `mapstructure:"poll_interval"`
		Absent  *inner        `mapstructure:"absent"`
		Skipped time.Duration `mapstructure:"-"`
		hidden  time.Duration
	}{Servers: []server{{}, {Inner: &inner{}}}}
	var keys []string
	WalkDurations(&cfg, func(key string, d *time.Duration) {
		keys = append(keys, key)
		*d = -time.Second
	})
	assert.Contains(t, keys, "servers[0].timeout")
	assert.Contains(t, keys, "servers[1].tls.reload_interval")
	assert.Contains(t, keys, "servers[1].inner.wait")
	assert.Contains(t, keys, "poll_interval")
	assert.NotContains(t, keys, "servers[0].inner.wait", "a nil pointer is not followed")
	assert.Equal(t, -time.Second, cfg.Servers[1].Inner.Wait, "fn gets the field's address")
	assert.Zero(t, cfg.Skipped)
	assert.Zero(t, cfg.hidden)
}
