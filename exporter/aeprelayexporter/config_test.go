package aeprelayexporter

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
)

func TestLoadConfig(t *testing.T) {
	configchecktest.LoadsAsExpected(t, filepath.Join("testdata", "config.yaml"), createDefaultConfig, []configchecktest.Expected[Config]{
		{
			ID: component.NewID(componentType),
			Want: func(cfg *Config) {
				cfg.Endpoint = "http://127.0.0.1:8787"
			},
		},
		{
			ID: component.NewIDWithName(componentType, "full"),
			Want: func(cfg *Config) {
				cfg.Endpoint = "https://relay.example.com:8787"
				cfg.Token = "s3cr3t"
				cfg.Instance = "otelcol-a/1"
				cfg.Emits = []string{"session", "run", "tool"}
				cfg.MaxCapture = aep.CaptureMetadata
				control := component.MustNewID("openhandscontrol")
				cfg.Control = &control
				cfg.HelloTimeout = 5 * time.Second
				cfg.ConfirmTimeout = 3 * time.Second
				cfg.PingInterval = 15 * time.Second
				cfg.MaxLinks = 4
				cfg.LinkIdleTimeout = time.Minute
				cfg.Timeout = 20 * time.Second
				cfg.Reconnect = backoff.Config{InitialInterval: 500 * time.Millisecond, MaxInterval: 10 * time.Second, Jitter: 0.1}
				cfg.TLS.CAFile = "/etc/ssl/relay-ca.pem"
				cfg.Headers = configopaque.MapList{{Name: "X-Tenant", Value: "acme"}}
				queue := cfg.QueueConfig.Get()
				queue.QueueSize = 5000
				storage := component.MustNewID("file_storage")
				queue.StorageID = &storage
				cfg.RetryConfig.InitialInterval = time.Second
				cfg.RetryConfig.MaxInterval = 30 * time.Second
				cfg.RetryConfig.MaxElapsedTime = 0
			},
		},
		{
			ID: component.NewIDWithName(componentType, "http"),
			Want: func(cfg *Config) {
				cfg.Endpoint = "http://127.0.0.1:8787/aep"
				cfg.Transport = TransportHTTP
				cfg.Auth = configoptional.Some(configauth.Config{AuthenticatorID: component.MustNewID("bearertokenauth")})
			},
		},
	})
}

func TestDefaultConfigNeedsEndpoint(t *testing.T) {
	err := confmap.Validate(NewFactory().CreateDefaultConfig())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `endpoint: must be an http or https URL, got ""`)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"endpoint_scheme", func(c *Config) { c.Endpoint = "ws://relay:8787" }, `endpoint: must be an http or https URL, got "ws://relay:8787"`},
		{"endpoint_no_host", func(c *Config) { c.Endpoint = "http://" }, `endpoint: must be an http or https URL`},
		{"transport_unknown", func(c *Config) { c.Transport = "sse" }, `transport: must be "websocket" or "http", got "sse"`},
		{"token_and_auth", func(c *Config) {
			c.Token = "t"
			c.Auth = configoptional.Some(configauth.Config{AuthenticatorID: component.MustNewID("bearertokenauth")})
		}, "token: set either token or auth, not both"},
		{"agent_empty", func(c *Config) { c.Agent = "" }, "agent: must not be empty"},
		{"max_capture_unknown", func(c *Config) { c.MaxCapture = "secret" }, `max_capture: unknown level "secret"`},
		{"control_over_http", func(c *Config) {
			c.Transport = TransportHTTP
			id := component.MustNewID("openhandscontrol")
			c.Control = &id
		}, "control: needs transport websocket"},
		{"timeout_zero", func(c *Config) { c.Timeout = 0 }, "timeout: must be positive"},
		{"hello_timeout_zero", func(c *Config) { c.HelloTimeout = 0 }, "hello_timeout: must be positive"},
		{"confirm_timeout_negative", func(c *Config) { c.ConfirmTimeout = -time.Second }, "confirm_timeout: must be positive"},
		{"ping_interval_zero", func(c *Config) { c.PingInterval = 0 }, "ping_interval: must be positive"},
		{"max_links_zero", func(c *Config) { c.MaxLinks = 0 }, "max_links: must be at least 1 (the link of agent), got 0"},
		{"link_idle_timeout_zero", func(c *Config) { c.LinkIdleTimeout = 0 }, "link_idle_timeout: must be positive"},
		{"reconnect_jitter", func(c *Config) { c.Reconnect.Jitter = 2 }, "reconnect.jitter: must be within [0, 1]"},
		{"endpoint_userinfo", func(c *Config) { c.Endpoint = "https://aep:hunter2@relay:8787" }, "endpoint: must not carry userinfo"},
		{"endpoint_fragment", func(c *Config) { c.Endpoint = "https://relay:8787/#hunter2" }, "endpoint: must not carry a fragment"},
		{"keepalive_negative", func(c *Config) { c.Keepalive.Get().IdleConnTimeout = -time.Second },
			"keepalive.idle_conn_timeout: must not be negative, got -1s"},
		{"num_consumers_zero", func(c *Config) { c.QueueConfig.Get().NumConsumers = 0 }, "sending_queue: `num_consumers` must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Endpoint = "http://127.0.0.1:8787"
			require.NoError(t, confmap.Validate(cfg), "the base config must be valid")
			tt.mutate(cfg)
			err := confmap.Validate(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "hunter2", "a secret in the endpoint is never printed")
		})
	}
}

// TestConfigValidateRejectsEveryNegativeDuration sets each duration of the
// full configuration negative in turn: the code reading a negative timeout
// or interval takes it as none.
func TestConfigValidateRejectsEveryNegativeDuration(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = "http://127.0.0.1:8787"
	keys := configchecktest.RejectsNegativeDurations(t, cfg)
	assert.Contains(t, keys, "http2_ping_timeout")
	assert.Contains(t, keys, "retry_on_failure.max_elapsed_time")
}

// TestConfigValidateReconnectOnce runs the collector's validation, which
// also walks nested configs: each reconnect problem is printed once, under
// its full key.
func TestConfigValidateReconnectOnce(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = "http://127.0.0.1:8787"
	cfg.Reconnect = backoff.Config{InitialInterval: -time.Second, MaxInterval: time.Second, Jitter: 2}
	err := confmap.Validate(cfg)
	require.Error(t, err)
	assert.Equal(t, []string{
		"reconnect.initial_interval: must be positive, got -1s",
		"reconnect.jitter: must be within [0, 1], got 2",
	}, strings.Split(err.Error(), "\n"))
}
