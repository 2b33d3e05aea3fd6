package openhandsreceiver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
)

// loadConfig loads one instance of testdata/config.yaml the way the
// collector does, ${env:...} references resolved.
func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"file:" + filepath.Join("testdata", "config.yaml")},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
	})
	require.NoError(t, err)
	cm, err := resolver.Resolve(context.Background())
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName(componentType.String(), name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestLoadConfig(t *testing.T) {
	t.Setenv("SHARD_INDEX", "2")

	t.Run("defaults", func(t *testing.T) {
		cfg := loadConfig(t, "")
		require.NoError(t, confmap.Validate(cfg))
		require.Len(t, cfg.Servers, 1)
		assert.Equal(t, "http://127.0.0.1:8000", cfg.Servers[0].Endpoint)
		assert.Equal(t, 15*time.Second, cfg.PollInterval)
		assert.Equal(t, "openhands", cfg.Agent)
		assert.False(t, cfg.Deltas)
		assert.Equal(t, aep.CaptureMetadata, cfg.Capture.Level)
		assert.True(t, cfg.RedactPII)
		assert.Equal(t, 10*time.Minute, cfg.IdleDetach)
		assert.Equal(t, backoff.Default(), cfg.Reconnect)
		assert.Nil(t, cfg.Storage)
		assert.Equal(t, ShardConfig{Index: 0, Count: 1}, cfg.Shard)
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
		assert.Equal(t, ShardConfig{Index: 2, Count: 3}, cfg.Shard, "index from ${env:SHARD_INDEX}")
	})

	t.Run("invalid", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "invalid"))
		require.Error(t, err)
		for _, want := range []string{
			`servers[0].endpoint: must be an http or https URL, got "ws://127.0.0.1:8000"`,
			`servers[0].socket: must be auto, events or session, got "telepathy"`,
			"servers[0].max_conversations: must not be negative",
			"poll_interval: must be positive",
			`capture.level: unknown level "everything"`,
			`capture.categories: unknown category "nonsense"`,
			"shard.index: must be in [0, 3), got 3",
		} {
			assert.ErrorContains(t, err, want)
		}
	})
}

func TestValidateShard(t *testing.T) {
	for _, tc := range []struct {
		shard ShardConfig
		want  string
	}{
		{ShardConfig{Index: 0, Count: 0}, "shard.count: must be at least 1, got 0"},
		{ShardConfig{Index: -1, Count: 2}, "shard.index: must be in [0, 2), got -1"},
		{ShardConfig{Index: 2, Count: 2}, "shard.index: must be in [0, 2), got 2"},
	} {
		cfg := createDefaultConfig().(*Config)
		cfg.Servers = []ServerConfig{{}}
		cfg.Servers[0].Endpoint = "http://127.0.0.1:8000"
		cfg.Shard = tc.shard
		assert.EqualError(t, cfg.Validate(), tc.want)
	}
}

func TestValidateRequiresServers(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.ErrorContains(t, cfg.Validate(), "servers: at least one server is required")
}
