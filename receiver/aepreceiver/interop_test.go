package aepreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"
	"github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
)

// Another collector's aeprelay exporter in HTTP mode delivers into this
// receiver: its events arrive unchanged and in order, and an event the
// receiver refuses (data above its declared capture, which the exporter
// does not check) is isolated by the 400's "line" and dropped alone.
func TestAeprelayExporterDeliversHere(t *testing.T) {
	authID := component.MustNewID("bearertokenauth")
	h := newHarness(t, nil, bearerTokenHost(t, authID, "hub-token"), func(c *Config) {
		c.Auth = authConfig(authID)
		c.Capture.Level = aep.CaptureFull
	})

	var sent [][]byte
	for _, g := range aeptest.Golden(t) {
		if g.Event.Agent == "claude-code" && g.Event.Session == "s_8f2c" {
			sent = append(sent, g.Raw)
		}
	}
	require.Greater(t, len(sent), 10)
	dishonest := event("dishonest", 99, "tool.requested", `{"tool":{"name":"Bash"},"args":{"command":"ls"}}`)
	batch := append(append(append([][]byte{}, sent[:5]...), dishonest), sent[5:]...)

	f := aeprelayexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*aeprelayexporter.Config)
	cfg.Endpoint = h.url
	cfg.Transport = aeprelayexporter.TransportHTTP
	cfg.Token = "hub-token"
	cfg.Agent = "claude-code"
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), hosttest.Extensions{}))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()

	require.NoError(t, exp.ConsumeLogs(context.Background(), recordsOf(t, batch)))

	assertRoundTrip(t, sent, h.records())
	// Refused in the whole batch, then alone: the exporter drops an event
	// only once the receiver refuses it by itself.
	assert.Equal(t, int64(2), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonCapture)))
	assert.Equal(t, int64(len(sent)), h.counter("otelcol_aepreceiver_events_accepted"))
}

// recordsOf projects wire events to log records, as a receiver would.
func recordsOf(t *testing.T, lines [][]byte) plog.Logs {
	t.Helper()
	b := newRecordBuilder()
	for _, raw := range lines {
		ev, err := aep.Parse(raw)
		require.NoError(t, err)
		lr := plog.NewLogRecord()
		require.NoError(t, projection.ToLogRecord(ev, lr, projection.Options{}))
		b.add(ev.Agent, lr, false)
	}
	return b.logs
}

// What the aepfile exporter writes, this receiver reads: the golden
// stream's session events ({agent}/{session}.jsonl) and its agent-scoped
// ones ({agent}.jsonl, once dropped) all arrive.
func TestJSONLReadsWhatAepfileWrites(t *testing.T) {
	dir := t.TempDir()
	var sent [][]byte
	var want []string
	agentScoped := 0
	for _, g := range aeptest.Golden(t) {
		if aep.IsCommand(g.Event.Type) {
			continue
		}
		sent = append(sent, g.Raw)
		want = append(want, g.Event.ID)
		if g.Event.Session == "" {
			agentScoped++
		}
	}
	require.Positive(t, agentScoped, "the golden stream holds agent-scoped events")

	f := aepfileexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*aepfileexporter.Config)
	cfg.Directory = dir
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), hosttest.Extensions{}))
	require.NoError(t, exp.ConsumeLogs(context.Background(), recordsOf(t, sent)))
	require.NoError(t, exp.Shutdown(context.Background()))

	h := newHarness(t, nil, nil, tailing(dir, nil), func(c *Config) { c.Capture.Level = aep.CaptureFull })
	var got []string
	require.Eventually(t, func() bool {
		got = got[:0]
		for _, r := range h.records() {
			got = append(got, r.event(t).ID)
		}
		return len(got) >= len(want)
	}, waitFor, 10*time.Millisecond, "awaiting %d events", len(want))
	assert.ElementsMatch(t, want, got)
}
