package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
)

var componentType = component.MustNewType("aeprelay")

const stability = component.StabilityLevelAlpha

// defaultMaxLinks is the agent's link and fifteen of other agents: a
// fleet on one host (Codex, VS Code, a few hook adapters) fits.
const defaultMaxLinks = 16

// NewFactory returns the aeprelay exporter factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(componentType, createDefaultConfig,
		exporter.WithLogs(createLogs, stability))
}

func createDefaultConfig() component.Config {
	client := confighttp.NewDefaultClientConfig()
	client.Timeout = 30 * time.Second
	queue := exporterhelper.NewDefaultQueueConfig()
	// One consumer keeps each session's events in the order they were
	// emitted: the relay orders by (epoch, seq) but fans out as received.
	queue.NumConsumers = 1
	retry := configretry.NewDefaultBackOffConfig()
	// A relay away longer than a time bound (an outage, credentials being
	// rotated) must not cost the queued events: the queue's size bounds
	// what waits, and past it the receiver is refused and holds its own.
	retry.MaxElapsedTime = 0
	return &Config{
		ClientConfig:    client,
		QueueConfig:     configoptional.Some(queue),
		RetryConfig:     retry,
		Transport:       TransportWebSocket,
		Agent:           "openhands",
		Emits:           []string{"session", "run", "tool", "attention", "error", "state", "control"},
		HelloTimeout:    10 * time.Second,
		ConfirmTimeout:  10 * time.Second,
		PingInterval:    30 * time.Second,
		Reconnect:       backoff.Default(),
		MaxLinks:        defaultMaxLinks,
		LinkIdleTimeout: 5 * time.Minute,
	}
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c := cfg.(*Config)
	e, err := newRelayExporter(c, set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewLogs(ctx, set, cfg, e.pushLogs,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: c.Timeout}),
		exporterhelper.WithRetry(c.RetryConfig),
		exporterhelper.WithQueue(c.QueueConfig),
	)
}
