package aepinboundprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"

import (
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor/internal/vendormap"
)

// Config is the aepinbound processor's configuration.
type Config struct {
	// Vendors are the profiles whose records are mapped: codex, vscode.
	Vendors []string `mapstructure:"vendors"`
	// Mode is companion (every record as x.{agent}.otel.*) or primary
	// (the core subset, where no hook adapter runs).
	Mode string `mapstructure:"mode"`
	// Capture is the ceiling the events are emitted at (AEP-0003 §9).
	Capture CaptureConfig `mapstructure:"capture"`
	// SourceHost is the authority of the sources below the redacted
	// ceiling, where the agent's host.name is not disclosed.
	SourceHost string `mapstructure:"source_host"`
	// MaxSessions bounds the sessions whose position is kept; the least
	// recently seen is forgotten first and takes a new epoch if it returns.
	MaxSessions int `mapstructure:"max_sessions"`
	// SecretNames are extra object keys whose values are always redacted.
	SecretNames []string `mapstructure:"secret_names"`
	// SecretEnv names environment variables whose values are redacted
	// wherever they appear (AEP-0003 §9.4 b).
	SecretEnv []string `mapstructure:"secret_env"`
	// RedactPII turns the PII step of the redaction pipeline on (default).
	RedactPII bool `mapstructure:"redact_pii"`
	// Storage is the id of a storage extension (e.g. file_storage) that
	// keeps each session's position across restarts; nil keeps none.
	Storage *component.ID `mapstructure:"storage"`

	_ struct{}
}

// CaptureConfig is the capture ceiling.
type CaptureConfig struct {
	Level aep.Capture `mapstructure:"level"`
}

// Validate checks the configuration; every message names its key.
func (cfg *Config) Validate() error {
	var errs []error
	if len(cfg.Vendors) == 0 {
		errs = append(errs, errors.New("vendors: at least one vendor is required (codex, vscode)"))
	}
	for i, v := range cfg.Vendors {
		if !slices.Contains(vendormap.Vendors, vendormap.Vendor(v)) {
			errs = append(errs, fmt.Errorf("vendors[%d]: unknown vendor %q (want codex or vscode)", i, v))
		} else if slices.Index(cfg.Vendors, v) < i {
			errs = append(errs, fmt.Errorf("vendors[%d]: %q is listed twice", i, v))
		}
	}
	switch vendormap.Mode(cfg.Mode) {
	case vendormap.ModeCompanion, vendormap.ModePrimary:
	default:
		errs = append(errs, fmt.Errorf("mode: must be companion or primary, got %q", cfg.Mode))
	}
	errs = append(errs, capture.CheckCeiling("capture", cfg.Capture.Level, nil)...)
	if !configcheck.IsHostName(cfg.SourceHost) {
		errs = append(errs, fmt.Errorf("source_host: %q is not a host name", cfg.SourceHost))
	}
	if cfg.MaxSessions < 1 {
		errs = append(errs, errors.New("max_sessions: must be at least 1"))
	}
	return errors.Join(errs...)
}

func (cfg *Config) vendors() []vendormap.Vendor {
	out := make([]vendormap.Vendor, len(cfg.Vendors))
	for i, v := range cfg.Vendors {
		out[i] = vendormap.Vendor(v)
	}
	return out
}
