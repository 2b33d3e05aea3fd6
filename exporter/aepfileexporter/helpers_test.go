package aepfileexporter

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 10 * time.Second

// newEvent is a valid session-scoped event of the openhands agent.
func newEvent(session string, seq int64) *aep.Event {
	return aeptest.RunStarted(session, seq, fmt.Sprintf("ev-%04d", seq), fmt.Sprintf("run-%d", seq))
}

// sessionEvents is events seq from..to-1 of one session.
func sessionEvents(session string, from, to int) []*aep.Event {
	var events []*aep.Event
	for seq := from; seq < to; seq++ {
		events = append(events, newEvent(session, int64(seq)))
	}
	return events
}

// testConfig writes under dir with no queue and no retry, so that
// ConsumeLogs returns the push's own error.
func testConfig(dir string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = dir
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	return cfg
}

type harness struct {
	cfg  *Config
	exp  exporter.Logs
	file *fileExporter
	tel  *componenttest.Telemetry
	host *testHost
	logs *observer.ObservedLogs
}

// startExporter starts an exporter of cfg, shut down when the test ends.
func startExporter(t *testing.T, cfg *Config) *harness {
	t.Helper()
	h := &harness{cfg: cfg, tel: componenttest.NewTelemetry(), host: &testHost{}}
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) })
	set := exportertest.NewNopSettings(componentType)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	core, logs := observer.New(zap.WarnLevel)
	set.Logger, h.logs = zap.New(core), logs
	require.NoError(t, cfg.Validate())
	file, err := newFileExporter(cfg, set)
	require.NoError(t, err)
	exp, err := wrap(context.Background(), set, cfg, file)
	require.NoError(t, err)
	h.file = file
	require.NoError(t, exp.Start(context.Background(), h.host))
	h.exp = exp
	t.Cleanup(func() { h.shutdown(t) })
	return h
}

// shutdown stops the exporter; calling it again is harmless.
func (h *harness) shutdown(t *testing.T) {
	t.Helper()
	require.NoError(t, h.exp.Shutdown(context.Background()))
}

func (h *harness) consume(t testing.TB, events ...*aep.Event) error {
	t.Helper()
	return h.exp.ConsumeLogs(context.Background(), aeptest.LogsOf(t, events...))
}

func (h *harness) counter(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	return telemetrytest.Counter(t, h.tel, name, attrs...)
}

// testHost records the component statuses reported to it.
type testHost struct {
	mu       sync.Mutex
	statuses []componentstatus.Status
}

func (*testHost) GetExtensions() map[component.ID]component.Component { return nil }

func (h *testHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.statuses = append(h.statuses, ev.Status())
}

func (h *testHost) reported() []componentstatus.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]componentstatus.Status(nil), h.statuses...)
}

// sessionPath is where cfg's exporter writes the openhands session's
// first segment.
func sessionPath(dir, session string) string {
	return filepath.Join(dir, "openhands", segmentName(escapeName(session), 0))
}

// readLog reads a session log's lines, checking that the file ends with a
// line break and holds no blank line.
func readLog(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEmpty(t, raw, "%s is empty", path)
	require.Equal(t, byte('\n'), raw[len(raw)-1], "%s ends with a line break", path)
	require.True(t, utf8.Valid(raw), "%s is UTF-8", path)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, len(raw)+1)
	for sc.Scan() {
		require.NotEmpty(t, sc.Text(), "%s has a blank line", path)
		lines = append(lines, sc.Text())
	}
	return lines
}

// checkStream is the conformance runner's judgement of a produced file, in
// Go: every line a valid event (run.py's schema validators) and the lines
// together a valid stream (its stream checkers); it returns the events.
func checkStream(t *testing.T, lines []string) []*aep.Event {
	t.Helper()
	var checker stream.Checker
	events := make([]*aep.Event, 0, len(lines))
	for i, line := range lines {
		require.NoError(t, schema.ValidateJSON([]byte(line)), "line %d", i+1)
		ev, err := aep.Parse([]byte(line))
		require.NoError(t, err, "line %d", i+1)
		require.NoError(t, checker.Add(ev), "line %d", i+1)
		events = append(events, ev)
	}
	return events
}

// idsOf lists the events' ids.
func idsOf(events []*aep.Event) []string {
	out := make([]string, 0, len(events))
	for _, ev := range events {
		out = append(out, ev.ID)
	}
	return out
}

// eventually polls cond until it holds or testTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, testTimeout, 10*time.Millisecond, what)
}
