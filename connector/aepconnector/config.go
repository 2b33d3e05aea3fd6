package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"errors"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

// Config is the aep connector's configuration.
type Config struct {
	// OpenSpans bounds what the connector remembers of operations that have
	// started but not ended, for sources whose terminal events carry no
	// duration_ms (the openhands receiver's always do).
	OpenSpans OpenSpansConfig `mapstructure:"open_spans"`
	// MaxSeries bounds the metric series the connector keeps; a point for a
	// series beyond it is dropped and counted.
	MaxSeries int `mapstructure:"max_series"`
	// Prices are models' prices in US dollars per million tokens, by the
	// gen_ai.request.model the events name: what a model call reported
	// with its tokens but no cost (Codex, VS Code) costs.
	Prices usage.Prices `mapstructure:"prices"`

	_ struct{}
}

// OpenSpansConfig bounds the map of open starts.
type OpenSpansConfig struct {
	// MaxEntries is the most open starts kept; the oldest is evicted to
	// make room for a new one.
	MaxEntries int `mapstructure:"max_entries"`
	// TTL is how long an open start is kept without its end.
	TTL time.Duration `mapstructure:"ttl"`

	_ struct{}
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	var errs []error
	if c.OpenSpans.MaxEntries < 0 {
		errs = append(errs, errors.New("open_spans.max_entries: must not be negative"))
	}
	if c.OpenSpans.TTL <= 0 {
		errs = append(errs, errors.New("open_spans.ttl: must be positive"))
	}
	if c.MaxSeries <= 0 {
		errs = append(errs, errors.New("max_series: must be positive"))
	}
	errs = append(errs, c.Prices.Validate("prices")...)
	return errors.Join(errs...)
}
