package aepreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

var componentType = component.MustNewType("aep")

const (
	stability = component.StabilityLevelAlpha
	// defaultEndpoint is loopback, one port above the reference relay's
	// default (8787), which often runs on the same host.
	defaultEndpoint = "localhost:8788"
	// defaultMaxBatchEvents is the reference relay's AEP_MAX_BATCH.
	defaultMaxBatchEvents = 10_000
)

// NewFactory returns the aep receiver factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(componentType, createDefaultConfig,
		receiver.WithLogs(createLogs, stability))
}

func createDefaultConfig() component.Config {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = defaultEndpoint
	return &Config{
		ServerConfig:   server,
		Capture:        CaptureConfig{Level: aep.CaptureMetadata},
		MaxBatchEvents: defaultMaxBatchEvents,
		JSONL:          JSONLConfig{PollInterval: time.Second},
	}
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	return newReceiver(cfg.(*Config), set, next)
}
