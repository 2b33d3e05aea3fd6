package aeppolicyprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/storageclient"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"
)

// TestUnreadableStateStartsAfresh: a stored session value that is not a
// policy state (another version, a torn write, a hostile file) is counted
// and left out; the processor starts, and the session is judged afresh.
func TestUnreadableStateStartsAfresh(t *testing.T) {
	host := hosttest.Extensions{fileStorageID: hosttest.FileStorage(t, t.TempDir())}
	self := component.NewID(componentType)
	client, err := storageclient.Get(context.Background(), host, fileStorageID, component.KindProcessor, self)
	require.NoError(t, err)
	require.NoError(t, client.Set(context.Background(), indexKey,
		[]byte(`{"v":1,"sessions":[{"Agent":"openhands","Session":"conv-1"}],"agents":["openhands"]}`)))
	require.NoError(t, client.Set(context.Background(), "session/openhands/conv-1", []byte(`{"v":99}`)))
	require.NoError(t, client.Set(context.Background(), "agent/openhands", []byte(`{"v":1,"agent":"someone-else"}`)))
	require.NoError(t, client.Close(context.Background()))

	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	cfg := createDefaultConfig().(*Config)
	cfg.Default.Session.CostUSD = LimitConfig{Hard: 1}
	cfg.Storage = &fileStorageID
	sink := new(consumertest.LogsSink)
	p, err := newProcessor(self, cfg, tel.NewTelemetrySettings(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), host))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	assert.Equal(t, int64(2), telemetrytest.Counter(t, tel, "otelcol_aeppolicy_storage_errors"))

	var o owner
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, o.event("run.finished", t0, costData(1.5)))))
	_, guardrails := eventsOf(t, sink.AllLogs())
	assert.Len(t, guardrails, 1, "judged afresh")
	assert.Equal(t, int64(1), telemetrytest.Counter(t, tel, "otelcol_aeppolicy_breaches",
		attribute.String("policy", "budget.session.cost"), attribute.String("level", "hard")))
}
