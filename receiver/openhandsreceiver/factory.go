package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
)

var componentType = component.MustNewType("openhands")

const (
	stability = component.StabilityLevelAlpha
	// defaultMaxFrameBytes matches the session socket's own frame cap
	// (MAX_FRAME_BYTES, 4 MiB) with room for large full_state snapshots.
	defaultMaxFrameBytes = 16 << 20
)

// NewFactory returns the openhands receiver factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(componentType, createDefaultConfig,
		receiver.WithLogs(createLogs, stability))
}

func createDefaultConfig() component.Config {
	return &Config{
		PollInterval:    15 * time.Second,
		RecheckInterval: 10 * time.Minute,
		StartAt:         startAtBeginning,
		Agent:           "openhands",
		Capture:         CaptureConfig{Level: aep.CaptureMetadata},
		RedactPII:       true,
		IdleDetach:      10 * time.Minute,
		Reconnect:       backoff.Default(),
		MaxFrameBytes:   defaultMaxFrameBytes,
		Shard:           ShardConfig{Count: 1},
		Webhook:         configoptional.Default(defaultWebhookConfig()),
	}
}

// defaultWebhookEndpoint is where the sink listens once configured.
const defaultWebhookEndpoint = "localhost:8398"

func defaultWebhookConfig() WebhookConfig {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = defaultWebhookEndpoint
	return WebhookConfig{ServerConfig: server}
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	return newReceiver(cfg.(*Config), set, next)
}
