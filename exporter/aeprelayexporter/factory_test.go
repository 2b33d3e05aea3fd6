package aeprelayexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "aeprelay", f.Type().String())
	assert.Equal(t, component.StabilityLevelAlpha, f.LogsStability())

	cfg := f.CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	c := cfg.(*Config)
	assert.Equal(t, TransportWebSocket, c.Transport)
	assert.Equal(t, "openhands", c.Agent)
	assert.Equal(t, 30*time.Second, c.Timeout)
	assert.Equal(t, 10*time.Second, c.HelloTimeout)
	assert.Equal(t, 10*time.Second, c.ConfirmTimeout)
	assert.Equal(t, 30*time.Second, c.PingInterval)
	assert.Equal(t, backoff.Default(), c.Reconnect)
	require.True(t, c.QueueConfig.HasValue(), "the sending queue is on by default")
	assert.Equal(t, 1, c.QueueConfig.Get().NumConsumers, "one consumer keeps events in order")
	assert.True(t, c.RetryConfig.Enabled)
	assert.Zero(t, c.RetryConfig.MaxElapsedTime, "a queued push is retried until the relay takes it, never dropped on a clock")
}

func TestCreateStartShutdown(t *testing.T) {
	for _, transport := range []Transport{TransportWebSocket, TransportHTTP} {
		t.Run(string(transport), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			cfg.Transport = transport
			cfg.Endpoint = "http://127.0.0.1:1" // nothing listens: start must not wait for it
			exp, err := NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(componentType), cfg)
			require.NoError(t, err)
			require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			require.NoError(t, exp.Shutdown(ctx))
		})
	}
}

func TestShutdownWithoutStart(t *testing.T) {
	cfg := testConfig("http://127.0.0.1:1")
	exp, err := NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(componentType), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Shutdown(context.Background()))
}

func TestCreateLogsRefusesANonHTTPEndpoint(t *testing.T) {
	for _, transport := range []Transport{TransportWebSocket, TransportHTTP} {
		t.Run(string(transport), func(t *testing.T) {
			cfg := testConfig("ftp://relay")
			cfg.Transport = transport
			_, err := NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(componentType), cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "endpoint")
		})
	}
}
