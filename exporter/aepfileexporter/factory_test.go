package aepfileexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "aepfile", f.Type().String())
	assert.Equal(t, component.StabilityLevelAlpha, f.LogsStability())

	cfg := f.CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	c := cfg.(*Config)
	assert.Equal(t, "0600", c.FileMode)
	assert.Equal(t, "0700", c.DirMode)
	assert.Equal(t, FsyncInterval, c.Fsync)
	assert.Equal(t, time.Second, c.FsyncInterval)
	assert.Equal(t, 256, c.MaxOpenFiles)
	assert.Equal(t, 30*time.Second, c.EndedGrace)
	assert.Equal(t, 1024, c.DedupWindow)
	require.True(t, c.QueueConfig.HasValue(), "the sending queue is on by default")
	assert.Equal(t, 1, c.QueueConfig.Get().NumConsumers, "one consumer keeps events in order")
	assert.True(t, c.RetryConfig.Enabled)
}

func TestCreateStartShutdown(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.Directory = t.TempDir()
	exp, err := NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(componentType), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, exp.ConsumeLogs(context.Background(), aeptest.LogsOf(t, newEvent("s1", 0))))
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.Len(t, readLog(t, sessionPath(cfg.Directory, "s1")), 1, "shutdown drains the queue to the file")
}

func TestShutdownWithoutStart(t *testing.T) {
	cfg := testConfig(t.TempDir())
	exp, err := NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(componentType), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Shutdown(context.Background()))
}
