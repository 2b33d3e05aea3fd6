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
	assert.NoError(t, Default().Validate())
	assert.ErrorContains(t, Config{MaxInterval: time.Second}.Validate(), "initial_interval")
	assert.ErrorContains(t, Config{InitialInterval: 2 * time.Second, MaxInterval: time.Second}.Validate(), "max_interval")
	assert.ErrorContains(t, Config{InitialInterval: time.Second, MaxInterval: time.Second, Jitter: 2}.Validate(), "jitter")
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := Config{InitialInterval: time.Hour, MaxInterval: time.Hour}
	assert.ErrorIs(t, c.Sleep(ctx, 0), context.Canceled)
	assert.NoError(t, Config{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}.Sleep(context.Background(), 0))
}
