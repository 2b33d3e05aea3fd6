package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"os"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
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

// mappingConfig is the mapping configuration of one conversation's session
// in generation epoch.
func (r *openhandsReceiver) mappingConfig(hostPort, conversationID string, epoch int64) mapping.Config {
	return mapping.Config{
		Agent:          r.cfg.Agent,
		Source:         sessionSource(hostPort, r.cfg.Agent, conversationID, epoch),
		ServerHost:     hostPort,
		ConversationID: conversationID,
		Ceiling: mapping.CapturePolicy{
			Default:    r.cfg.Capture.Level,
			Categories: r.cfg.Capture.Categories,
		},
		Deltas:            r.cfg.Deltas,
		Redactor:          r.redactor,
		NewStreamRedactor: func() mapping.StreamRedactor { return r.redactor.Stream() },
	}
}
