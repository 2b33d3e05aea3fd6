package aeprelayexporter

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 10 * time.Second

// newEvent is a valid session-scoped event of the openhands agent.
func newEvent(session string, seq int64) *aep.Event {
	return aeptest.RunStarted(session, seq, fmt.Sprintf("ev-%s-%04d", session, seq), fmt.Sprintf("run:%s:%d", session, seq))
}

// attentionRequest is an attention.requested at capture full: its prompt
// and option labels are free text.
func attentionRequest(session string, seq int64) *aep.Event {
	return aeptest.MakeAttentionRequest(newEvent(session, seq))
}

// sessionEvents is n events of one session, seq 0..n-1.
func sessionEvents(session string, n int) []*aep.Event {
	events := make([]*aep.Event, n)
	for i := range events {
		events[i] = newEvent(session, int64(i))
	}
	return events
}

// appendForeignRecord adds a log record that is not an AEP event.
func appendForeignRecord(ld plog.Logs) {
	lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
	lr.SetEventName("app.request")
	lr.Body().SetStr("GET /")
}

// ids lists the events' ids; nil for none, as relayIDs does.
func ids(events []*aep.Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.ID)
	}
	return out
}

// testConfig is a config for endpoint with test-sized timings; no queue and
// no retry, so that ConsumeLogs returns the push's own error.
func testConfig(endpoint string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = endpoint
	cfg.Instance = "otelcol-test/1"
	cfg.Timeout = 5 * time.Second
	cfg.HelloTimeout = 2 * time.Second
	cfg.ConfirmTimeout = 2 * time.Second
	cfg.Reconnect = backoff.Config{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond}
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	return cfg
}

// withRetry turns exporterhelper's retry on with test-sized intervals.
func withRetry(cfg *Config) *Config {
	cfg.RetryConfig.Enabled = true
	cfg.RetryConfig.InitialInterval = 20 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 100 * time.Millisecond
	cfg.RetryConfig.MaxElapsedTime = testTimeout
	return cfg
}

// withQueue turns exporterhelper's sending queue on, as by default: the
// push returns once its records are queued.
func withQueue(cfg *Config) *Config {
	cfg.QueueConfig = createDefaultConfig().(*Config).QueueConfig
	return cfg
}

// harness is a started exporter with its telemetry and log.
type harness struct {
	exp  exporter.Logs
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
	host *testHost
}

// startExporter creates and starts the exporter; cleanup shuts it down.
func startExporter(t *testing.T, cfg *Config, host *testHost) *harness {
	t.Helper()
	h := newHarness(t, cfg)
	if host == nil {
		host = newTestHost()
	}
	h.host = host
	require.NoError(t, h.exp.Start(context.Background(), host))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		require.NoError(t, h.exp.Shutdown(ctx))
	})
	return h
}

func newHarness(t *testing.T, cfg *Config) *harness {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := exportertest.NewNopSettings(componentType)
	// The id a restarted collector keeps: the persistent queue's storage
	// is keyed by it.
	set.ID = component.NewID(componentType)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	exp, err := NewFactory().CreateLogs(context.Background(), set, cfg)
	require.NoError(t, err)
	return &harness{exp: exp, tel: tel, logs: logs}
}

func (h *harness) consume(t *testing.T, ld plog.Logs) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return h.exp.ConsumeLogs(ctx, ld)
}

// counter sums a counter's data points whose attributes include attrs.
func (h *harness) counter(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	return telemetrytest.Counter(t, h.tel, name, attrs...)
}

func (h *harness) histogramCount(t *testing.T, name string) uint64 {
	t.Helper()
	m, err := h.tel.GetMetric(name)
	require.NoError(t, err)
	hist, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is not a float64 histogram", name)
	var n uint64
	for _, dp := range hist.DataPoints {
		n += dp.Count
	}
	return n
}

// logged returns the log entries with message msg.
func (h *harness) logged(msg string) []observer.LoggedEntry {
	return h.logs.FilterMessage(msg).All()
}

// eventually waits for cond, failing t after testTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testHost offers extensions and records component status.
type testHost struct {
	extensions map[component.ID]component.Component

	mu       sync.Mutex
	statuses []componentstatus.Status
	errs     []error
}

var _ componentstatus.Reporter = (*testHost)(nil)

func newTestHost() *testHost {
	return &testHost{extensions: map[component.ID]component.Component{}}
}

func (h *testHost) GetExtensions() map[component.ID]component.Component { return h.extensions }

func (h *testHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.statuses = append(h.statuses, ev.Status())
	h.errs = append(h.errs, ev.Err())
}

func (h *testHost) lastStatus() (componentstatus.Status, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.statuses) == 0 {
		return componentstatus.StatusNone, nil
	}
	return h.statuses[len(h.statuses)-1], h.errs[len(h.errs)-1]
}

// fakeControl is a control extension that records the commands it gets.
type fakeControl struct {
	component.StartFunc
	component.ShutdownFunc
	accepts  []string
	window   time.Duration
	commands chan receivedCommand
}

type receivedCommand struct {
	raw           []byte
	ev            *aep.Event
	authenticated bool
}

var _ ControlHandler = (*fakeControl)(nil)

func newFakeControl(accepts ...string) *fakeControl {
	return &fakeControl{accepts: accepts, window: 5 * time.Second, commands: make(chan receivedCommand, 16)}
}

func (f *fakeControl) Bind()                    {}
func (f *fakeControl) Accepts() []string        { return f.accepts }
func (f *fakeControl) AckWindow() time.Duration { return f.window }
func (f *fakeControl) HandleCommand(_ context.Context, raw []byte, ev *aep.Event, authenticated bool) {
	f.commands <- receivedCommand{raw: raw, ev: ev, authenticated: authenticated}
}

// fakeAuth is an auth extension that sets a bearer token.
type fakeAuth struct {
	component.StartFunc
	component.ShutdownFunc
	token string
}

func (f fakeAuth) RoundTripper(base http.RoundTripper) (http.RoundTripper, error) {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+f.token)
		return base.RoundTrip(req)
	}), nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
