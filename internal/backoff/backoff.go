// Package backoff computes reconnect delays: exponential from an initial
// interval to a cap, with full-range jitter so that many conversations (or
// replicas) that lost the same server do not come back in lockstep.
package backoff // import "github.com/otelcol-openhands/otelcol-openhands/internal/backoff"

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Config is the reconnect backoff an operator sets.
type Config struct {
	// InitialInterval is the delay before the first retry.
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	// MaxInterval caps the delay.
	MaxInterval time.Duration `mapstructure:"max_interval"`
	// Jitter in [0, 1] spreads each delay uniformly over ±Jitter of itself.
	Jitter float64 `mapstructure:"jitter"`

	_ struct{}
}

// Default is 1 s doubling to 30 s with ±20 % jitter, the agent SDK's own
// reconnect range.
func Default() Config {
	return Config{InitialInterval: time.Second, MaxInterval: 30 * time.Second, Jitter: 0.2}
}

// Validate checks the ranges. key is where the backoff sits in its
// owner's configuration (e.g. "reconnect"), and every message starts with
// its full key, so an error that joins several problems names each once.
// Taking the key keeps Config from being a confmap.Validator: the
// collector would call it a second time and prefix only its first line.
func (c Config) Validate(key string) error {
	var errs []error
	if c.InitialInterval <= 0 {
		errs = append(errs, fmt.Errorf("%s.initial_interval: must be positive, got %s", key, c.InitialInterval))
	}
	if c.MaxInterval < c.InitialInterval {
		errs = append(errs, fmt.Errorf("%s.max_interval: must be at least initial_interval (%s), got %s", key, c.InitialInterval, c.MaxInterval))
	}
	if c.Jitter < 0 || c.Jitter > 1 {
		errs = append(errs, fmt.Errorf("%s.jitter: must be within [0, 1], got %g", key, c.Jitter))
	}
	return errors.Join(errs...)
}

// Delay returns the wait before retry number attempt (0-based).
func (c Config) Delay(attempt int) time.Duration {
	d := c.InitialInterval
	for i := 0; i < attempt && d < c.MaxInterval; i++ {
		d *= 2
	}
	d = min(d, c.MaxInterval)
	if c.Jitter > 0 {
		spread := float64(d) * c.Jitter
		d = time.Duration(float64(d) - spread + rand.Float64()*2*spread) //nolint:gosec // jitter, not security
	}
	return max(d, 0)
}

// Sleep waits for Delay(attempt) or until ctx ends, reporting which.
func (c Config) Sleep(ctx context.Context, attempt int) error {
	t := time.NewTimer(c.Delay(attempt))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
