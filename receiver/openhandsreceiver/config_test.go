package openhandsreceiver

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"
)

// loadConfig loads one instance of testdata/config.yaml the way the
// collector does, ${env:...} references resolved.
func loadConfig(t *testing.T, name string) *Config {
	return configchecktest.LoadTestdata[Config](t, component.NewIDWithName(componentType, name), createDefaultConfig)
}

func TestLoadConfig(t *testing.T) {
	t.Setenv("SHARD_INDEX", "2")

	t.Run("defaults", func(t *testing.T) {
		cfg := loadConfig(t, "")
		require.NoError(t, confmap.Validate(cfg))
		require.Len(t, cfg.Servers, 1)
		assert.Equal(t, "http://127.0.0.1:8000", cfg.Servers[0].Endpoint)
		assert.True(t, cfg.Servers[0].Keepalive.HasValue(), "a servers entry keeps its connections alive")
		assert.Equal(t, 15*time.Second, cfg.PollInterval)
		assert.Equal(t, "openhands", cfg.Agent)
		assert.False(t, cfg.Deltas)
		assert.Equal(t, aep.CaptureMetadata, cfg.Capture.Level)
		assert.True(t, cfg.RedactPII)
		assert.Equal(t, 10*time.Minute, cfg.IdleDetach)
		assert.Equal(t, 10*time.Minute, cfg.RecheckInterval)
		assert.Equal(t, "beginning", cfg.StartAt)
		assert.Equal(t, backoff.Default(), cfg.Reconnect)
		assert.Nil(t, cfg.Storage)
		assert.Equal(t, ShardConfig{Count: 1}, cfg.Shard)
	})

	t.Run("full", func(t *testing.T) {
		cfg := loadConfig(t, "full")
		require.NoError(t, confmap.Validate(cfg))
		require.Len(t, cfg.Servers, 2)
		assert.Equal(t, "prod", cfg.Servers[0].Name)
		assert.Equal(t, "session", cfg.Servers[0].Socket)
		assert.Empty(t, cfg.Servers[1].Socket, "auto")
		assert.Equal(t, "k-123", string(cfg.Servers[0].SessionAPIKey))
		assert.Equal(t, 20*time.Second, cfg.Servers[0].Timeout)
		assert.Equal(t, 500, cfg.Servers[0].MaxConversations)
		assert.Zero(t, cfg.Servers[1].MaxConversations, "sized from the descriptor limit")
		assert.Equal(t, "/etc/ssl/agents-ca.pem", cfg.Servers[0].TLS.CAFile)
		assert.Equal(t, 30*time.Second, cfg.PollInterval)
		assert.Equal(t, 5*time.Minute, cfg.RecheckInterval)
		assert.Equal(t, "end", cfg.StartAt)
		assert.Equal(t, "openhands-prod", cfg.Agent)
		assert.True(t, cfg.Deltas)
		assert.Equal(t, map[string]aep.Capture{"attention": aep.CaptureRedacted}, cfg.Capture.Categories)
		assert.Equal(t, []string{"github_token"}, cfg.SecretNames)
		assert.Equal(t, []string{"OPENAI_API_KEY"}, cfg.SecretEnv)
		require.NotNil(t, cfg.Control)
		assert.Equal(t, component.MustNewID("openhandscontrol"), *cfg.Control)
		assert.False(t, cfg.RedactPII)
		assert.Equal(t, 5*time.Minute, cfg.IdleDetach)
		assert.Equal(t, 2*time.Second, cfg.Reconnect.InitialInterval)
		assert.Equal(t, 0.5, cfg.Reconnect.Jitter)
		assert.Equal(t, int64(4<<20), cfg.MaxFrameBytes)
		assert.Equal(t, component.MustNewIDWithName("file_storage", "openhands"), *cfg.Storage)
		assert.Equal(t, ShardConfig{Index: ptr(2), Count: 3}, cfg.Shard, "index from ${env:SHARD_INDEX}")
	})

	t.Run("invalid", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "invalid"))
		require.Error(t, err)
		for _, want := range []string{
			`servers[0].endpoint: must be an http or https URL, got "ws://127.0.0.1:8000"`,
			`servers[0].socket: must be auto, events or session, got "telepathy"`,
			"servers[0].max_conversations: must not be negative",
			"servers[1].timeout: must not be negative, got -5s",
			"servers[2].endpoint: the same server as servers[1].endpoint (http://agents.example:8000)",
			"poll_interval: must be positive",
			"recheck_interval: must not be negative, got -1s",
			`start_at: must be beginning or end, got "middle"`,
			`capture.level: unknown level "everything"`,
			`capture.categories: unknown category "nonsense"`,
			"shard.index: must be in [0, 3), got 3",
		} {
			assert.ErrorContains(t, err, want)
		}
	})
}

func TestLoadTargetsConfig(t *testing.T) {
	t.Run("targets", func(t *testing.T) {
		cfg := loadConfig(t, "targets")
		require.NoError(t, confmap.Validate(cfg), "targets without servers")
		assert.Empty(t, cfg.Servers)
		tc := cfg.Targets
		assert.Equal(t, []string{"/etc/otelcol/agents/*.yaml"}, tc.FileSD[0].Files)
		assert.Equal(t, 10*time.Second, tc.FileSD[0].RefreshInterval)
		assert.Equal(t, "http://allocator/jobs/openhands/targets?collector_id=c-0", tc.HTTPSD[0].Endpoint)
		assert.Equal(t, SourceLimits{RefreshInterval: defaultRefreshInterval, MaxTargets: 500, MaxBytes: 1 << 20},
			tc.HTTPSD[0].withDefaults())
		assert.Equal(t, "rk-1", string(tc.RuntimeAPI[0].APIKey))
		assert.Equal(t, "ak-1", string(tc.AppServer[0].SessionAPIKey))
		for i, client := range []*confighttp.ClientConfig{&tc.HTTPSD[0].ClientConfig, &tc.RuntimeAPI[0].ClientConfig, &tc.AppServer[0].ClientConfig} {
			assert.True(t, client.Keepalive.HasValue(), "source %d keeps its connections alive", i)
		}
		assert.Equal(t, socketSession, tc.Socket)
		assert.Equal(t, 2, tc.maxConversations())
		assert.Equal(t, 300, tc.MaxTargets)
		assert.Equal(t, 5.0, tc.attachRate())
		assert.Equal(t, time.Minute, tc.grace())
		assert.Equal(t, "/var/run/secrets/openhands", tc.SessionAPIKeyDir)
		assert.Equal(t, "OPENHANDS_KEY_", tc.SessionAPIKeyEnvPrefix)
	})
	t.Run("invalid", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "targets_invalid"))
		require.Error(t, err)
		for _, want := range []string{
			`targets.file_sd[0].files: "[unclosed": syntax error in pattern`,
			"targets.file_sd[1].files: at least one path or glob is required",
			"targets.file_sd[1].refresh_interval: must not be negative",
			`targets.http_sd[0].endpoint: must be an http or https URL, got "ftp://allocator"`,
			"targets.http_sd[0].max_bytes: must not be negative",
			"targets.runtime_api[0].endpoint: must not carry a query",
			`targets.socket: must be auto, events or session, got "telepathy"`,
			"targets.max_targets: must not be negative",
			"targets.attach_rate: must not be negative",
			"targets.grace: must not be negative",
			"targets.session_api_key_dir: must be an absolute path",
			"webhook: not supported with targets sources",
		} {
			assert.ErrorContains(t, err, want)
		}
		assert.NotContains(t, err.Error(), "servers: at least one", "a targets source stands for servers")
	})
}

func TestValidateShard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shard ShardConfig
		want  string
	}{
		{"no replicas", ShardConfig{Index: ptr(0), Count: 0}, "shard.count: must be at least 1, got 0"},
		{"negative index", ShardConfig{Index: ptr(-1), Count: 2}, "shard.index: must be in [0, 2), got -1"},
		{"index past count", ShardConfig{Index: ptr(2), Count: 2}, "shard.index: must be in [0, 2), got 2"},
		{"unset index of several", ShardConfig{Count: 2}, "shard.index: must be set when count is 2 (an empty or unset ${env:...} leaves it unset)"},
		{"unset index of one", ShardConfig{Count: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Shard = tc.shard
			if tc.want == "" {
				assert.NoError(t, cfg.Validate())
				return
			}
			assert.EqualError(t, cfg.Validate(), tc.want)
		})
	}
}

// TestShardIndexFromEmptyEnv resolves testdata's ${env:SHARD_INDEX} the way
// the collector does: with the variable empty or unset the index resolves
// to nothing, which an int field would take as shard 0.
func TestShardIndexFromEmptyEnv(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		t.Setenv("SHARD_INDEX", "")
		assert.ErrorContains(t, confmap.Validate(loadConfig(t, "full")), "shard.index: must be set when count is 3")
	})
	t.Run("unset", func(t *testing.T) {
		t.Setenv("SHARD_INDEX", "")
		require.NoError(t, os.Unsetenv("SHARD_INDEX"))
		assert.ErrorContains(t, confmap.Validate(loadConfig(t, "full")), "shard.index: must be set when count is 3")
	})
	t.Run("zero", func(t *testing.T) {
		t.Setenv("SHARD_INDEX", "0")
		cfg := loadConfig(t, "full")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, ptr(0), cfg.Shard.Index)
	})
}

func TestValidateRequiresServers(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.ErrorContains(t, cfg.Validate(), "servers: at least one server, or a targets source, is required")
}

func TestValidateEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name      string
		endpoints []string
		want      string
	}{
		{"distinct", []string{"http://h:8000", "http://h:8001", "https://h:8000", "http://h:8000/tenant-a"}, ""},
		{"trailing slash", []string{"http://h:8000", "http://h:8000/"}, "servers[1].endpoint: the same server as servers[0].endpoint (http://h:8000)"},
		{"default port", []string{"http://other", "http://h", "http://h:80"}, "servers[2].endpoint: the same server as servers[1].endpoint (http://h)"},
		{"host case", []string{"https://Agents.Example/base/", "https://agents.example:443/base"},
			"servers[1].endpoint: the same server as servers[0].endpoint (https://agents.example/base)"},
		{"userinfo", []string{"http://admin:hunter2@h:8000"}, "servers[0].endpoint: must not carry userinfo"},
		{"query", []string{"http://h:8000", "http://h:8001/?tenant=a"}, "servers[1].endpoint: must not carry a query"},
		{"fragment", []string{"http://h:8000#a"}, "servers[0].endpoint: must not carry a fragment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Servers = make([]ServerConfig, len(tc.endpoints))
			for i, e := range tc.endpoints {
				cfg.Servers[i].Endpoint = e
			}
			err := cfg.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}

// TestValidateRejectsEveryNegativeDuration sets each duration of a
// configuration with every optional part present negative in turn: the
// code reading a negative timeout or interval takes it as none.
func TestValidateRejectsEveryNegativeDuration(t *testing.T) {
	cfg := validConfig()
	cfg.Servers = append(cfg.Servers, cfg.Servers[0])
	cfg.Servers[1].Endpoint = "http://127.0.0.1:8001"
	keys := configchecktest.RejectsNegativeDurations(t, cfg)
	assert.Contains(t, keys, "servers[1].timeout")
	assert.Contains(t, keys, "reconnect.max_interval")
}

// TestValidateReconnectOnce runs the collector's validation, which also
// walks nested configs: each reconnect problem is printed once, under its
// full key.
func TestValidateReconnectOnce(t *testing.T) {
	cfg := validConfig()
	cfg.Reconnect = backoff.Config{InitialInterval: -time.Second, MaxInterval: -2 * time.Second, Jitter: 2}
	err := confmap.Validate(cfg)
	require.Error(t, err)
	assert.Equal(t, []string{
		"reconnect.initial_interval: must be positive, got -1s",
		"reconnect.max_interval: must be at least initial_interval (-1s), got -2s",
		"reconnect.jitter: must be within [0, 1], got 2",
	}, strings.Split(err.Error(), "\n"))
}

// validConfig is the default configuration with one loopback server.
func validConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Servers = []ServerConfig{{}}
	cfg.Servers[0].Endpoint = "http://127.0.0.1:8000"
	return cfg
}

func ptr[T any](v T) *T { return &v }

func TestLoadWebhookConfig(t *testing.T) {
	assert.False(t, loadConfig(t, "").Webhook.HasValue(), "off unless configured")
	cfg := loadConfig(t, "webhook")
	require.NoError(t, confmap.Validate(cfg))
	require.True(t, cfg.Webhook.HasValue())
	hook := cfg.Webhook.Get()
	assert.Equal(t, "0.0.0.0:8398", hook.NetAddr.Endpoint)
	assert.Equal(t, int64(8<<20), hook.MaxRequestBodySize)
	assert.True(t, hook.Only)
	assert.Equal(t, confighttp.NewDefaultServerConfig().ReadHeaderTimeout, hook.ReadHeaderTimeout, "the collector's server defaults")
}

func TestValidateWebhook(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		edit func(*WebhookConfig)
		want string
	}{
		{"a key per server", []string{"k-a", "k-b"}, nil, ""},
		{"a server without a key", []string{"k-a", ""}, nil,
			"servers[1].session_api_key: required with webhook: a push is accepted only with a configured server's key"},
		{"two servers with one key", []string{"k-a", "k-a"}, nil,
			"servers[1].session_api_key: the same key as servers[0]; with webhook each server's key must tell its pushes apart"},
		{"no endpoint", []string{"k-a"}, func(w *WebhookConfig) { w.NetAddr.Endpoint = "" }, "webhook.endpoint: must not be empty"},
		{"a negative body limit", []string{"k-a"}, func(w *WebhookConfig) { w.MaxRequestBodySize = -1 },
			"webhook.max_request_body_size: must not be negative (0 is the default, 20 MiB)"},
		{"a negative timeout", []string{"k-a"}, func(w *WebhookConfig) { w.ReadTimeout = -time.Second },
			"webhook.read_timeout: must not be negative, got -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Servers = make([]ServerConfig, len(tc.keys))
			for i, k := range tc.keys {
				cfg.Servers[i].Endpoint = fmt.Sprintf("http://127.0.0.1:%d", 8000+i)
				cfg.Servers[i].SessionAPIKey = configopaque.String(k)
			}
			hook := cfg.Webhook.GetOrInsertDefault()
			if tc.edit != nil {
				tc.edit(hook)
			}
			err := cfg.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.want)
			assert.NotContains(t, err.Error(), "k-a", "keys stay out of errors")
		})
	}
}
