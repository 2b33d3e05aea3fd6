package aepreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"

import (
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
)

// Config is the aep receiver's configuration.
type Config struct {
	// ServerConfig is the listener: endpoint, TLS, CORS, auth (an
	// authenticator extension such as bearertokenauth),
	// max_request_body_size, timeouts.
	confighttp.ServerConfig `mapstructure:",squash"`
	// Capture is the ceiling events are passed on under (AEP-0003 §9.1):
	// an event above it is down-levelled, never refused.
	Capture CaptureConfig `mapstructure:"capture"`
	// MaxBatchEvents bounds the events of one NDJSON batch (413
	// too-many-events past it, nothing ingested).
	MaxBatchEvents int `mapstructure:"max_batch_events"`
	// Agents, when set, are the only envelope agents taken: a body holding
	// an event of another agent is refused whole (403), so that a sender
	// cannot speak as an agent it is not (the openhands receiver's, say).
	Agents []string `mapstructure:"agents"`
	// JSONL tails AEP session logs as a second input; off unless
	// jsonl.directory is set.
	JSONL JSONLConfig `mapstructure:"jsonl"`

	_ struct{}
}

// CaptureConfig is the capture ceiling: a level and per-category overrides
// keyed by the type's first token ("attention", "tool", ...; "x" is every
// vendor type).
type CaptureConfig struct {
	Level      aep.Capture            `mapstructure:"level"`
	Categories map[string]aep.Capture `mapstructure:"categories"`
}

// ceiling returns the level an event of eventType is passed on under.
func (c CaptureConfig) ceiling(eventType string) aep.Capture {
	category, _, _ := strings.Cut(eventType, ".")
	if level, ok := c.Categories[category]; ok {
		return level
	}
	return c.Level
}

// highest is the most permissive level any type is passed on under.
func (c CaptureConfig) highest() aep.Capture {
	top := c.Level
	for _, level := range c.Categories {
		if level.Rank() > top.Rank() {
			top = level
		}
	}
	return top
}

// Validate checks the configuration; every message names its key.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("endpoint: must not be empty"))
	}
	errs = append(errs, configcheck.Check(
		configcheck.Duration{Key: "read_timeout", Value: cfg.ReadTimeout},
		configcheck.Duration{Key: "read_header_timeout", Value: cfg.ReadHeaderTimeout},
		configcheck.Duration{Key: "write_timeout", Value: cfg.WriteTimeout},
		configcheck.Duration{Key: "dialer.timeout", Value: cfg.NetAddr.DialerConfig.Timeout},
		configcheck.Duration{Key: "jsonl.poll_interval", Value: cfg.JSONL.PollInterval, Positive: true})...)
	if cfg.JSONL.Storage != nil && cfg.JSONL.Directory == "" {
		errs = append(errs, errors.New("jsonl.storage: set only with jsonl.directory"))
	}
	if cfg.MaxRequestBodySize < 0 {
		errs = append(errs, errors.New("max_request_body_size: must not be negative (0 is the default, 20 MiB)"))
	}
	if cfg.MaxBatchEvents < 1 {
		errs = append(errs, fmt.Errorf("max_batch_events: must be at least 1, got %d", cfg.MaxBatchEvents))
	}
	for i, agent := range cfg.Agents {
		if agent == "" {
			errs = append(errs, fmt.Errorf("agents[%d]: must not be empty", i))
		}
	}
	errs = append(errs, capture.CheckCeiling("capture", cfg.Capture.Level, cfg.Capture.Categories)...)
	return errors.Join(errs...)
}
