package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDelayGrowsToCap(t *testing.T) {
	c := Config{InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		assert.Equal(t, w*time.Millisecond, c.Delay(i), "attempt %d", i)
	}
	assert.Equal(t, time.Second, c.Delay(1000), "large attempts never overflow")
}

func TestDelayJitterStaysInRange(t *testing.T) {
	c := Config{InitialInterval: time.Second, MaxInterval: time.Second, Jitter: 0.5}
	seen := map[time.Duration]bool{}
	for range 200 {
		d := c.Delay(3)
		assert.GreaterOrEqual(t, d, 500*time.Millisecond)
		assert.LessOrEqual(t, d, 1500*time.Millisecond)
		seen[d] = true
	}
	assert.Greater(t, len(seen), 1, "jitter must spread delays")
}

func TestValidate(t *testing.T) {
	assert.NoError(t, Default().Validate("reconnect"))
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"zero initial", Config{MaxInterval: time.Second}, "reconnect.initial_interval: must be positive, got 0s"},
		{"negative initial", Config{InitialInterval: -time.Second, MaxInterval: time.Second}, "reconnect.initial_interval: must be positive, got -1s"},
		{"negative max", Config{InitialInterval: time.Second, MaxInterval: -time.Second},
			"reconnect.max_interval: must be at least initial_interval (1s), got -1s"},
		{"jitter", Config{InitialInterval: time.Second, MaxInterval: time.Second, Jitter: 2}, "reconnect.jitter: must be within [0, 1], got 2"},
		{"every line keyed", Config{InitialInterval: -2 * time.Second, MaxInterval: -3 * time.Second, Jitter: -1},
			"reconnect.initial_interval: must be positive, got -2s\n" +
				"reconnect.max_interval: must be at least initial_interval (-2s), got -3s\n" +
				"reconnect.jitter: must be within [0, 1], got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.EqualError(t, tc.cfg.Validate("reconnect"), tc.want)
		})
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := Config{InitialInterval: time.Hour, MaxInterval: time.Hour}
	assert.ErrorIs(t, c.Sleep(ctx, 0), context.Canceled)
	assert.NoError(t, Config{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}.Sleep(context.Background(), 0))
}
