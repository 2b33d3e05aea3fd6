package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
)

var componentType = component.MustNewType("aep")

const stability = component.StabilityLevelAlpha

// NewFactory returns the aep connector factory.
func NewFactory() connector.Factory {
	return connector.NewFactory(componentType, createDefaultConfig,
		connector.WithLogsToTraces(createLogsToTraces, stability),
		connector.WithLogsToMetrics(createLogsToMetrics, stability))
}

func createDefaultConfig() component.Config {
	return &Config{
		OpenSpans: OpenSpansConfig{MaxEntries: 10000, TTL: time.Hour},
		MaxSeries: 2000,
	}
}

func createLogsToTraces(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Traces) (connector.Logs, error) {
	core, err := newCore(cfg.(*Config), set.TelemetrySettings, false)
	if err != nil {
		return nil, err
	}
	return &tracesConnector{next: next, core: core, lineage: newLineage()}, nil
}

func createLogsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Logs, error) {
	c := cfg.(*Config)
	latest := latestGenAIOptedIn()
	core, err := newCore(c, set.TelemetrySettings, latest)
	if err != nil {
		return nil, err
	}
	return &metricsConnector{
		next:      next,
		core:      core,
		maxSeries: c.MaxSeries,
		now:       time.Now,
		series:    make(map[string]*series),
		latest:    latest,
		prices:    c.Prices,
	}, nil
}
