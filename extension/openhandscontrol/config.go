package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
)

// Config is the control gate's configuration.
type Config struct {
	// Enabled opens the gate. Off, the hello declares accepts: [] and no
	// command is ever executed.
	Enabled bool `mapstructure:"enabled"`
	// AckWindow is the declared ack_window_ms (AEP-0004 §3).
	AckWindow time.Duration `mapstructure:"ack_window"`
	// ReplyGuard bounds the wait for the agent server's REST answer; past
	// it the command is acked control.accepted (will try). It must leave
	// room inside AckWindow for the ack to travel.
	ReplyGuard time.Duration `mapstructure:"reply_guard"`
	// SendInputMaxChars caps every operator text a command carries
	// (send_input's text, a respond's answer.text), in characters
	// (Unicode code points).
	SendInputMaxChars int `mapstructure:"send_input_max_chars"`
	// ConversationRateLimit bounds the REST writes to one conversation.
	ConversationRateLimit RateLimit `mapstructure:"conversation_rate_limit"`

	_ struct{}
}

// RateLimit is a token bucket: Burst writes at once, refilled at
// WritesPerSecond.
type RateLimit struct {
	WritesPerSecond float64 `mapstructure:"writes_per_second"`
	Burst           int     `mapstructure:"burst"`

	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration; every message names its key.
func (cfg *Config) Validate() error {
	errs := configcheck.Check(
		configcheck.Duration{Key: "ack_window", Value: cfg.AckWindow, Positive: true},
		configcheck.Duration{Key: "reply_guard", Value: cfg.ReplyGuard, Positive: true},
	)
	if cfg.AckWindow > 0 && cfg.ReplyGuard > 0 && cfg.ReplyGuard >= cfg.AckWindow {
		errs = append(errs, fmt.Errorf("reply_guard: must be shorter than ack_window (%s), so the ack arrives inside the declared window", cfg.AckWindow))
	}
	if cfg.SendInputMaxChars <= 0 {
		errs = append(errs, errors.New("send_input_max_chars: must be positive"))
	}
	if wps := cfg.ConversationRateLimit.WritesPerSecond; !(wps > 0) || math.IsInf(wps, 1) {
		errs = append(errs, errors.New("conversation_rate_limit.writes_per_second: must be a positive number"))
	}
	if cfg.ConversationRateLimit.Burst <= 0 {
		errs = append(errs, errors.New("conversation_rate_limit.burst: must be positive"))
	}
	return errors.Join(errs...)
}
