package openhandsreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/goleak"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "openhands", f.Type().String())
	assert.Equal(t, stability, f.LogsStability())
	assert.NoError(t, componenttest.CheckConfigStruct(f.CreateDefaultConfig()))
}

func TestCreateStartShutdownWithoutServerReachable(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	sc := ServerConfig{}
	sc.Endpoint = "http://127.0.0.1:1" // nothing listens there
	cfg.Servers = []ServerConfig{sc}
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(componentType), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
}

func TestShutdownWithoutStart(t *testing.T) {
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(componentType), createDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.NoError(t, r.Shutdown(context.Background()))
}

func TestCreateRefusesAnUnusableCeiling(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Capture.Level = aep.Capture("bogus")
	_, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(componentType), cfg, consumertest.NewNop())
	assert.Error(t, err)
}
