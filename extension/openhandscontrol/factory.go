package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
)

var componentType = component.MustNewType("openhandscontrol")

const stability = component.StabilityLevelAlpha

// NewFactory returns the openhandscontrol extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(componentType, createDefaultConfig, create, stability)
}

func createDefaultConfig() component.Config {
	return &Config{
		AckWindow:         10 * time.Second,
		ReplyGuard:        8 * time.Second,
		SendInputMaxChars: 4000,
		ConversationRateLimit: RateLimit{
			WritesPerSecond: 1,
			Burst:           10,
		},
	}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newGate(set.ID, cfg.(*Config), set.TelemetrySettings)
}
