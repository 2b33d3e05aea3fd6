package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

var componentType = component.MustNewType("aepfile")

const stability = component.StabilityLevelAlpha

// NewFactory returns the aepfile exporter factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(componentType, createDefaultConfig,
		exporter.WithLogs(createLogs, stability))
}

func createDefaultConfig() component.Config {
	queue := exporterhelper.NewDefaultQueueConfig()
	// One consumer keeps each session's lines in the order the events
	// were emitted.
	queue.NumConsumers = 1
	return &Config{
		TimeoutConfig: exporterhelper.NewDefaultTimeoutConfig(),
		QueueConfig:   configoptional.Some(queue),
		RetryConfig:   configretry.NewDefaultBackOffConfig(),
		FileMode:      "0600",
		DirMode:       "0700",
		Fsync:         FsyncInterval,
		FsyncInterval: time.Second,
		MaxOpenFiles:  256,
		EndedGrace:    30 * time.Second,
		DedupWindow:   1024,
	}
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c := cfg.(*Config)
	e, err := newFileExporter(c, set)
	if err != nil {
		return nil, err
	}
	return wrap(ctx, set, c, e)
}

// wrap puts exporterhelper's timeout, retry and queue around e.
func wrap(ctx context.Context, set exporter.Settings, c *Config, e *fileExporter) (exporter.Logs, error) {
	return exporterhelper.NewLogs(ctx, set, c, e.pushLogs,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(c.TimeoutConfig),
		exporterhelper.WithRetry(c.RetryConfig),
		exporterhelper.WithQueue(c.QueueConfig),
	)
}
