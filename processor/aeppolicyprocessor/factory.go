package aeppolicyprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
)

var componentType = component.MustNewType("aeppolicy")

const stability = component.StabilityLevelAlpha

// NewFactory returns the aeppolicy processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(componentType, createDefaultConfig,
		processor.WithLogs(createLogs, stability))
}

// createDefaultConfig turns the cheap deterministic rules on (loops,
// stuck runs) and leaves budgets, which depend on the user's money, off.
func createDefaultConfig() component.Config {
	return &Config{
		Default: RulesConfig{
			Loop:  LoopConfig{RepeatedTool: 5, Window: 10 * time.Minute, RepeatedError: 5},
			Stuck: StuckConfig{After: 10 * time.Minute},
		},
		SourceHost:    "aeppolicy",
		CheckInterval: 10 * time.Second,
		MaxSessions:   10000,
	}
}

func createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	return newProcessor(set.ID, cfg.(*Config), set.TelemetrySettings, next)
}
