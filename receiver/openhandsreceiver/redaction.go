package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"os"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
)

// newRedactor builds the AEP-0003 §9.4 pipeline for every field the
// capture ceiling lets ride at `redacted`. secret_env is resolved once, at
// start, so secret values never enter the configuration or the logs.
func newRedactor(cfg *Config) (*capture.Redactor, error) {
	return capture.NewRedactor(capture.RedactorConfig{
		SecretValues: capture.SecretValuesFromEnv(cfg.SecretEnv, os.LookupEnv),
		SecretKeys:   cfg.SecretNames,
		DisablePII:   !cfg.RedactPII,
	})
}
