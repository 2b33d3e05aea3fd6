package aeprelayexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
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

// TestPlaintextWarnedAtStart: a relay reached over plaintext http on a
// host that is not loopback gets one warning at start when the link
// carries credentials or commands the gate accepts.
func TestPlaintextWarnedAtStart(t *testing.T) {
	controlID := component.MustNewID("openhandscontrol")
	for _, tc := range []struct {
		name     string
		endpoint string
		mutate   func(*Config, *testHost)
		want     []any // what the warning says is carried; nil: no warning
	}{
		{"token", "http://relay.invalid:1", func(c *Config, _ *testHost) { c.Token = "t" }, []any{"token"}},
		{"access_token", "http://relay.invalid:1/?access_token=" + relayToken, func(*Config, *testHost) {}, []any{"access_token"}},
		{"Authorization header", "http://relay.invalid:1", func(c *Config, _ *testHost) {
			c.Headers = configopaque.MapList{{Name: "authorization", Value: "Bearer " + relayToken}}
		}, []any{"Authorization header"}},
		{"open gate", "http://relay.invalid:1", func(c *Config, h *testHost) {
			c.Control = &controlID
			h.extensions[controlID] = newFakeControl("control.pause")
		}, []any{"control commands"}},
		{"closed gate", "http://relay.invalid:1", func(c *Config, h *testHost) {
			c.Control = &controlID
			h.extensions[controlID] = newFakeControl()
		}, nil},
		{"nothing carried", "http://relay.invalid:1", func(*Config, *testHost) {}, nil},
		{"loopback", "http://127.0.0.1:1", func(c *Config, _ *testHost) { c.Token = "t" }, nil},
		{"https", "https://relay.invalid:1", func(c *Config, _ *testHost) { c.Token = "t" }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, host := testConfig(tc.endpoint), newTestHost()
			tc.mutate(cfg, host)
			h := startExporter(t, cfg, host)
			warnings := h.logs.FilterFieldKey("carries").All()
			if tc.want == nil {
				assert.Empty(t, warnings)
				return
			}
			require.Len(t, warnings, 1)
			assert.Equal(t, "endpoint", warnings[0].ContextMap()["key"])
			assert.Equal(t, tc.want, warnings[0].ContextMap()["carries"])
			assert.NotContains(t, warnings[0].ContextMap()["endpoint"], relayToken)
		})
	}
}

// TestSendingQueueBatches: the exporter batches in its own sending_queue
// (the README's alternative to a batch processor): pushes merge into one
// confirmed batch and every event arrives, in order.
func TestSendingQueueBatches(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	cfg := socketConfig(relay)
	queue := createDefaultConfig().(*Config).QueueConfig
	batch := exporterhelper.NewDefaultBatchConfig()
	batch.FlushTimeout = time.Minute // only min_size flushes
	batch.MinSize = 50
	queue.Get().Batch = configoptional.Some(batch)
	cfg.QueueConfig = queue
	h := startExporter(t, cfg, nil)
	events := append(sessionEvents("s1", 25), sessionEvents("s2", 25)...)
	for i := 0; i < 25; i += 5 {
		require.NoError(t, h.consume(t, aeptest.LogsOf(t, append(events[i:i+5:i+5], events[25+i:30+i]...)...)))
	}
	eventually(t, "every event at the relay", func() bool { return relay.Received() == len(events) })
	// One consumer sends a batch only after the one before it was
	// confirmed, so with every event in, unmerged pushes would have shown
	// at least four pings; the counter itself lags the relay's reading.
	pings := func() int {
		n := 0
		for _, f := range relay.Frames() {
			if f.Type == "ping" {
				n++
			}
		}
		return n
	}
	eventually(t, "the batch's ping", func() bool { return pings() > 0 })
	assert.Equal(t, 1, pings(), "five pushes merged into one batch")
	var s1, s2 []string
	for _, rec := range relay.Events() {
		if rec.Event.Session == "s1" {
			s1 = append(s1, rec.Event.ID)
		} else {
			s2 = append(s2, rec.Event.ID)
		}
	}
	assert.Equal(t, ids(events[:25]), s1)
	assert.Equal(t, ids(events[25:]), s2)
}
