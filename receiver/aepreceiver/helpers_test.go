package aepreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"
)

// harness is one started receiver on a loopback port, its log records
// landing in sink (through next, when a test puts a consumer in front).
type harness struct {
	t    *testing.T
	rcv  *aepReceiver
	sink *consumertest.LogsSink
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
	url  string

	stopOnce, rcvOnce sync.Once
}

type harnessOption func(*Config)

func newHarness(t *testing.T, next func(*consumertest.LogsSink) consumer.Logs, host component.Host, opts ...harnessOption) *harness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	for _, o := range opts {
		o(cfg)
	}
	require.NoError(t, cfg.Validate())
	core, observed := observer.New(zap.InfoLevel)
	h := &harness{t: t, sink: new(consumertest.LogsSink), tel: componenttest.NewTelemetry(), logs: observed}
	set := receivertest.NewNopSettings(componentType)
	set.ID = component.NewID(componentType) // one id across restarts, as a collector keeps it
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	var logs consumer.Logs = h.sink
	if next != nil {
		logs = next(h.sink)
	}
	r, err := newReceiver(cfg, set, logs)
	require.NoError(t, err)
	if host == nil {
		host = componenttest.NewNopHost()
	}
	require.NoError(t, r.Start(context.Background(), host))
	h.rcv, h.url = r, "http://"+r.addr.String()
	t.Cleanup(h.stop)
	return h
}

// stop shuts the receiver and its telemetry down, once.
func (h *harness) stop() {
	h.stopReceiver()
	h.stopOnce.Do(func() { require.NoError(h.t, h.tel.Shutdown(context.Background())) })
}

// stopReceiver shuts the receiver down, once: its tailer's last round has
// then settled, counts included, which the sink sees before they are made.
func (h *harness) stopReceiver() {
	h.rcvOnce.Do(func() { require.NoError(h.t, h.rcv.Shutdown(context.Background())) })
}

// reply is one HTTP answer, its JSON body decoded when there is one.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// request is one POST (or another method) to the receiver.
type request struct {
	method      string
	path        string
	contentType string
	version     string // AEP-Version; "-" omits the header
	token       string
	body        []byte
}

func (h *harness) do(rq request) reply {
	h.t.Helper()
	if rq.method == "" {
		rq.method = http.MethodPost
	}
	if rq.path == "" {
		rq.path = eventsPath
	}
	req, err := http.NewRequest(rq.method, h.url+rq.path, bytes.NewReader(rq.body))
	require.NoError(h.t, err)
	if rq.contentType != "" {
		req.Header.Set("Content-Type", rq.contentType)
	}
	switch rq.version {
	case "":
		req.Header.Set("AEP-Version", aep.Version)
	case "-":
	default:
		req.Header.Set("AEP-Version", rq.version)
	}
	if rq.token != "" {
		req.Header.Set("Authorization", "Bearer "+rq.token)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	out := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(h.t, json.Unmarshal(raw, &out.body), "%s", raw)
	}
	return out
}

// post sends events as one NDJSON batch.
func (h *harness) post(lines ...[]byte) reply {
	h.t.Helper()
	return h.do(request{contentType: "application/x-ndjson", body: ndjson(lines...)})
}

func ndjson(lines ...[]byte) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// records returns every log record received so far, in order, each with
// its resource.
func (h *harness) records() []receivedRecord { return receivedBy(h.sink) }

// receivedBy is every record sink received, in order.
func receivedBy(sink *consumertest.LogsSink) []receivedRecord {
	var out []receivedRecord
	for _, ld := range sink.AllLogs() {
		for i := range ld.ResourceLogs().Len() {
			rl := ld.ResourceLogs().At(i)
			for j := range rl.ScopeLogs().Len() {
				lrs := rl.ScopeLogs().At(j).LogRecords()
				for k := range lrs.Len() {
					out = append(out, receivedRecord{lr: lrs.At(k), rl: rl})
				}
			}
		}
	}
	return out
}

type receivedRecord struct {
	lr plog.LogRecord
	rl plog.ResourceLogs
}

// event converts a received record back to AEP with the projection's
// inverse, as the aeprelay exporter does.
func (r receivedRecord) event(t *testing.T) *aep.Event {
	t.Helper()
	ev, err := projection.FromLogRecord(r.lr, r.rl.Resource())
	require.NoError(t, err)
	return ev
}

func (h *harness) counter(name string, attrs ...attribute.KeyValue) int64 {
	return telemetrytest.Counter(h.t, h.tel, name, attrs...)
}

// canonical is the RFC 8785 form of one wire event.
func canonical(t *testing.T, raw []byte) string {
	t.Helper()
	v, err := aep.DecodeValue(raw)
	require.NoError(t, err)
	out, err := aep.Canonical(v)
	require.NoError(t, err)
	return string(out)
}

// switchableConsumer refuses with err while it is set, else passes on;
// refused, when set, is signalled (without blocking) on each refusal.
type switchableConsumer struct {
	*consumertest.LogsSink
	refused chan struct{}
	mu      sync.Mutex
	err     error
}

func (c *switchableConsumer) set(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

func (c *switchableConsumer) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		select {
		case c.refused <- struct{}{}:
		default:
		}
		return err
	}
	return c.LogsSink.ConsumeLogs(ctx, ld)
}

// bearerTokenHost starts the distribution's bearertokenauth extension with
// one token and returns a host that offers it as id.
func bearerTokenHost(t *testing.T, id component.ID, token string) component.Host {
	t.Helper()
	f := bearertokenauthextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*bearertokenauthextension.Config)
	cfg.BearerToken = configopaque.String(token)
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return hosttest.Extensions{id: ext}
}

func authConfig(id component.ID) configoptional.Optional[confighttp.AuthConfig] {
	return configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: id}})
}

func downlevelled(ev *aep.Event, ceiling aep.Capture) *aep.Event {
	return capture.Downlevel(ev, ceiling)
}
