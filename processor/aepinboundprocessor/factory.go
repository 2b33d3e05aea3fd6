package aepinboundprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor/internal/vendormap"
)

var componentType = component.MustNewType("aepinbound")

const stability = component.StabilityLevelAlpha

// NewFactory returns the aepinbound processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(componentType, createDefaultConfig,
		processor.WithLogs(createLogs, stability))
}

func createDefaultConfig() component.Config {
	return &Config{
		Vendors:     []string{string(vendormap.Codex), string(vendormap.VSCode)},
		Mode:        string(vendormap.ModeCompanion),
		Capture:     CaptureConfig{Level: aep.CaptureMetadata},
		SourceHost:  "otelcol",
		MaxSessions: 10000,
		RedactPII:   true,
	}
}

func createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	return newProcessor(set.ID, cfg.(*Config), set.TelemetrySettings, next)
}
