package aepreceiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl/telemetrydecltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestREADMEListsEveryMetric(t *testing.T) {
	telemetrydecltest.RequireREADMEMatches(t, "otelcol_aepreceiver_", newTelemetry)
}

// event is one valid session-scoped wire event of agent "claude-code".
func event(id string, seq int, typ, data string) []byte {
	return fmt.Appendf(nil, `{"aep":"0.1","id":%q,"type":%q,"time":"2026-07-03T10:15:03.000Z","source":"aep://host-a/agent/claude-code/session/s1","agent":"claude-code","session":"s1","seq":%d,"capture":"metadata","data":%s}`,
		id, typ, seq, data)
}

var (
	toolRequested = event("e1", 1, "tool.requested", `{"tool":{"name":"Bash","call_id":"t_91"}}`)
	runStarted    = event("e2", 2, "run.started", `{"trigger":"user"}`)
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "aep", f.Type().String())
	assert.Equal(t, stability, f.LogsStability())
	assert.NoError(t, componenttest.CheckConfigStruct(f.CreateDefaultConfig()))
}

func TestShutdownWithoutStart(t *testing.T) {
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(componentType), createDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.NoError(t, r.Shutdown(context.Background()))
}

func TestStartFailsWhenThePortIsTaken(t *testing.T) {
	h := newHarness(t, nil, nil)
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = h.rcv.addr.String()
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(componentType), cfg, consumertest.NewNop())
	require.NoError(t, err)
	assert.Error(t, r.Start(context.Background(), componenttest.NewNopHost()))
	assert.NoError(t, r.Shutdown(context.Background()))
}

// One JSON event becomes the log record the openhands receiver's emit
// path writes for it: the same projection, resource service.name = agent.
func TestSingleEventIsProjected(t *testing.T) {
	h := newHarness(t, nil, nil)
	resp := h.do(request{contentType: "application/json; charset=utf-8", body: toolRequested})
	require.Equal(t, http.StatusAccepted, resp.status, "%s", resp.raw)

	got := h.records()
	require.Len(t, got, 1)
	ev, err := aep.Parse(toolRequested)
	require.NoError(t, err)
	want := plog.NewLogRecord()
	require.NoError(t, projection.ToLogRecord(ev, want, projection.Options{}))
	assert.Equal(t, want.Attributes().AsRaw(), got[0].lr.Attributes().AsRaw())
	assert.Equal(t, want.Body().AsRaw(), got[0].lr.Body().AsRaw())
	assert.Equal(t, want.EventName(), got[0].lr.EventName())
	assert.Equal(t, want.Timestamp(), got[0].lr.Timestamp())
	assert.NotZero(t, got[0].lr.ObservedTimestamp())
	svc, ok := got[0].rl.Resource().Attributes().Get(projection.AttrServiceName)
	require.True(t, ok)
	assert.Equal(t, "claude-code", svc.Str())
	assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_events_accepted"))
}

// An NDJSON batch keeps its order, and events of different agents land
// under their own resource without reordering.
func TestBatchKeepsOrder(t *testing.T) {
	h := newHarness(t, nil, nil)
	other := bytes.ReplaceAll(event("e3", 0, "run.started", `{}`), []byte("claude-code"), []byte("codex"))
	resp := h.post(toolRequested, other, runStarted)
	require.Equal(t, http.StatusAccepted, resp.status, "%s", resp.raw)

	got := h.records()
	require.Len(t, got, 3)
	var ids, agents []string
	for _, r := range got {
		ev := r.event(t)
		ids = append(ids, ev.ID)
		svc, _ := r.rl.Resource().Attributes().Get(projection.AttrServiceName)
		agents = append(agents, svc.Str())
	}
	assert.Equal(t, []string{"e1", "e3", "e2"}, ids)
	assert.Equal(t, []string{"claude-code", "codex", "claude-code"}, agents)
	require.Len(t, h.sink.AllLogs(), 1, "one body, one ConsumeLogs")
	assert.Equal(t, 3, h.sink.AllLogs()[0].ResourceLogs().Len())
}

// The status table of the HTTP POST binding: every refusal passes nothing
// on and is counted.
func TestRefusals(t *testing.T) {
	dishonest := event("e9", 9, "tool.requested", `{"tool":{"name":"Bash"},"args":{"command":"cat ~/.ssh/id_rsa"}}`)
	missingAgent := bytes.Replace(runStarted, []byte(`"agent":"claude-code",`), nil, 1)
	command := []byte(`{"aep":"0.1","id":"c1","type":"control.pause","time":"2026-07-03T10:15:03Z","source":"aep://ops/agent/mission-control","agent":"mission-control","session":"s1"}`)
	vendorCommand := []byte(`{"aep":"0.1","id":"c2","type":"x.openhands.control.send_input","time":"2026-07-03T10:15:03Z","source":"aep://ops/agent/mission-control","agent":"mission-control","session":"s1","data":{"text":"rm -rf /"}}`)
	tests := []struct {
		name       string
		rq         request
		status     int
		errorCode  string
		line       int // the body's "line", -1 when absent
		metric     string
		attr       attribute.KeyValue
		metricWant int64
	}{
		{name: "no AEP-Version", rq: request{contentType: "application/json", version: "-", body: toolRequested},
			status: http.StatusUpgradeRequired, line: -1, metric: "otelcol_aepreceiver_requests_refused", attr: attribute.String("reason", requestVersion), metricWant: 1},
		{name: "AEP-Version 1.0", rq: request{contentType: "application/json", version: "1.0", body: toolRequested},
			status: http.StatusUpgradeRequired, line: -1, metric: "otelcol_aepreceiver_requests_refused", attr: attribute.String("reason", requestVersion), metricWant: 1},
		{name: "text/plain", rq: request{contentType: "text/plain", body: toolRequested},
			status: http.StatusUnsupportedMediaType, errorCode: "unsupported-media-type", line: -1, metric: "otelcol_aepreceiver_requests_refused", attr: attribute.String("reason", requestContentType), metricWant: 1},
		{name: "no Content-Type", rq: request{body: toolRequested},
			status: http.StatusUnsupportedMediaType, errorCode: "unsupported-media-type", line: -1, metric: "otelcol_aepreceiver_requests_refused", attr: attribute.String("reason", requestContentType), metricWant: 1},
		{name: "body over max_request_body_size", rq: request{contentType: "application/x-ndjson", body: bytes.Repeat(ndjson(toolRequested), 30)},
			status: http.StatusRequestEntityTooLarge, errorCode: "payload-too-large", line: -1, metric: "otelcol_aepreceiver_requests_refused", attr: attribute.String("reason", requestTooLarge), metricWant: 1},
		{name: "batch over max_batch_events", rq: request{contentType: "application/x-ndjson", body: ndjson(toolRequested, runStarted, toolRequested, runStarted)},
			status: http.StatusRequestEntityTooLarge, errorCode: "too-many-events", line: -1, metric: "otelcol_aepreceiver_requests_refused", attr: attribute.String("reason", requestTooManyEvents), metricWant: 1},
		{name: "invalid single event", rq: request{contentType: "application/json", body: missingAgent},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: -1, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonInvalid), metricWant: 1},
		{name: "not JSON", rq: request{contentType: "application/json", body: []byte(`{"aep":`)},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: -1, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonInvalid), metricWant: 1},
		{name: "two events as application/json", rq: request{contentType: "application/json", body: ndjson(toolRequested, runStarted)},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: -1, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonInvalid), metricWant: 1},
		{name: "empty batch", rq: request{contentType: "application/x-ndjson"},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: -1, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonInvalid), metricWant: 1},
		{name: "invalid line refuses the whole batch", rq: request{contentType: "application/x-ndjson", body: ndjson(toolRequested, missingAgent, runStarted)},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: 1, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonBatch), metricWant: 2},
		{name: "blank line in a batch", rq: request{contentType: "application/x-ndjson", body: []byte(string(toolRequested) + "\n\n" + string(runStarted))},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: 1, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonInvalid), metricWant: 1},
		{name: "data above its declared capture", rq: request{contentType: "application/x-ndjson", body: ndjson(toolRequested, dishonest)},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: 1, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonCapture), metricWant: 1},
		{name: "control command", rq: request{contentType: "application/json", body: command},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: -1, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonCommand), metricWant: 1},
		{name: "vendor control command", rq: request{contentType: "application/x-ndjson", body: ndjson(vendorCommand)},
			status: http.StatusBadRequest, errorCode: "invalid-event", line: 0, metric: "otelcol_aepreceiver_events_refused", attr: attribute.String("reason", reasonCommand), metricWant: 1},
		{name: "PUT", rq: request{method: http.MethodPut, contentType: "application/json", body: toolRequested},
			status: http.StatusMethodNotAllowed, errorCode: "method-not-allowed", line: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, nil, func(c *Config) {
				c.MaxRequestBodySize = 4096
				c.MaxBatchEvents = 3
			})
			resp := h.do(tt.rq)
			require.Equal(t, tt.status, resp.status, "%s", resp.raw)
			assert.Empty(t, h.records(), "nothing is passed on")
			assert.Zero(t, h.counter("otelcol_aepreceiver_events_accepted"))
			if tt.status == http.StatusUpgradeRequired {
				assert.Equal(t, map[string]any{"versions": []any{"0.1"}}, resp.body)
			} else {
				assert.Equal(t, tt.errorCode, resp.body["error"])
				assert.NotEmpty(t, resp.body["detail"])
			}
			if tt.line >= 0 {
				assert.EqualValues(t, tt.line, resp.body["line"], "the first refused event's 0-based index")
			} else {
				assert.NotContains(t, resp.body, "line")
			}
			if tt.metric != "" {
				assert.Equal(t, tt.metricWant, h.counter(tt.metric, tt.attr))
			}
		})
	}
}

// An AEP-Version header may offer several versions, comma-separated; one
// of them 0.1 is enough.
func TestAEPVersionOffers(t *testing.T) {
	for _, version := range []string{"0.1", "1.0, 0.1", "0.1,1.0"} {
		t.Run(version, func(t *testing.T) {
			h := newHarness(t, nil, nil)
			resp := h.do(request{contentType: "application/json", version: version, body: toolRequested})
			assert.Equal(t, http.StatusAccepted, resp.status, "%s", resp.raw)
		})
	}
}

// Every event of a refused batch is counted, each under its reason.
func TestRefusedBatchCountsEveryEvent(t *testing.T) {
	h := newHarness(t, nil, nil)
	bad := bytes.Replace(runStarted, []byte(`"seq":2,`), nil, 1)
	resp := h.post(toolRequested, bad, runStarted, bad)
	require.Equal(t, http.StatusBadRequest, resp.status)
	assert.EqualValues(t, 1, resp.body["line"])
	assert.Equal(t, int64(2), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonInvalid)))
	assert.Equal(t, int64(2), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonBatch)))
}

func TestDiscovery(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *Config) {
		c.Capture.Categories = map[string]aep.Capture{"attention": aep.CaptureRedacted}
	})
	want := map[string]any{
		"aep":       []any{"0.1"},
		"role":      "collector",
		"endpoints": map[string]any{"events": "/events"},
		"capabilities": map[string]any{
			"capture": []any{"none", "metadata", "redacted"},
			"control": map[string]any{"accepts": []any{}},
		},
	}
	for _, path := range []string{discoveryPath, eventsPath} {
		t.Run(path, func(t *testing.T) {
			resp := h.do(request{method: http.MethodGet, path: path, version: "-"})
			require.Equal(t, http.StatusOK, resp.status)
			assert.Equal(t, want, resp.body)
		})
	}
	t.Run("POST to discovery", func(t *testing.T) {
		resp := h.do(request{path: discoveryPath, contentType: "application/json", body: toolRequested})
		assert.Equal(t, http.StatusMethodNotAllowed, resp.status)
		assert.Equal(t, "GET, HEAD", resp.header.Get("Allow"))
	})
}

// Backpressure is never a silent drop: a temporary refusal is a 503 with
// Retry-After and the sender's resend of the same events is taken; a
// permanent one is a 400 the sender must not resend.
func TestPipelineRefusals(t *testing.T) {
	var next *switchableConsumer
	h := newHarness(t, func(sink *consumertest.LogsSink) consumer.Logs {
		next = &switchableConsumer{LogsSink: sink}
		return next
	}, nil)

	next.set(errors.New("data refused due to high memory usage"))
	resp := h.post(toolRequested, runStarted)
	require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s", resp.raw)
	assert.Equal(t, "1", resp.header.Get("Retry-After"))
	assert.Equal(t, int64(2), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonBackpressure)))

	next.set(consumererror.NewPermanent(errors.New("no")))
	resp = h.post(toolRequested, runStarted)
	require.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.raw)
	assert.Equal(t, "pipeline-refused", resp.body["error"])
	assert.Equal(t, int64(2), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonPipeline)))
	assert.Empty(t, h.records())

	next.set(nil)
	resp = h.post(toolRequested, runStarted)
	require.Equal(t, http.StatusAccepted, resp.status)
	assert.Len(t, h.records(), 2)
}

// A redelivery (same source and id) is passed on again: consumers dedupe
// on (source, id), as AEP-0001 §7.4 has them do.
func TestRedeliveryIsPassedOn(t *testing.T) {
	h := newHarness(t, nil, nil)
	require.Equal(t, http.StatusAccepted, h.post(toolRequested).status)
	require.Equal(t, http.StatusAccepted, h.post(toolRequested).status)
	got := h.records()
	require.Len(t, got, 2)
	assert.Equal(t, got[0].event(t), got[1].event(t))
}

// An event above the capture ceiling is passed on down-levelled, with the
// internal/aep/capture rules, never above it.
func TestCeilingDownlevels(t *testing.T) {
	var request, failed aeptest.GoldenLine
	for _, g := range aeptest.Golden(t) {
		switch g.Index {
		case 4:
			request = g // attention.requested, capture redacted, real prompt
		case 15:
			failed = g // tool.failed, capture redacted, error.message
		}
	}
	require.Equal(t, "attention.requested", request.Event.Type)
	require.Equal(t, "tool.failed", failed.Event.Type)

	tests := []struct {
		name       string
		categories map[string]aep.Capture
		line       aeptest.GoldenLine
		want       aep.Capture
	}{
		{name: "above the level", line: failed, want: aep.CaptureMetadata},
		{name: "within a category override", categories: map[string]aep.Capture{"attention": aep.CaptureRedacted}, line: request, want: aep.CaptureRedacted},
		{name: "above a category override", categories: map[string]aep.Capture{"attention": aep.CaptureNone}, line: request, want: aep.CaptureNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, nil, func(c *Config) { c.Capture.Categories = tt.categories })
			require.Equal(t, http.StatusAccepted, h.post(tt.line.Raw).status)
			got := h.records()
			require.Len(t, got, 1)
			ev := got[0].event(t)
			assert.Equal(t, tt.want, ev.EffectiveCapture())
			if tt.want != tt.line.Event.EffectiveCapture() {
				assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_events_downlevelled"))
			} else {
				assert.Zero(t, h.counter("otelcol_aepreceiver_events_downlevelled"))
			}
			wantRaw, err := downlevelled(tt.line.Event, tt.want).MarshalJSON()
			require.NoError(t, err)
			gotRaw, err := ev.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, canonical(t, wantRaw), canonical(t, gotRaw))
			if !tt.want.Allows(aep.CaptureRedacted) {
				assert.NotContains(t, string(gotRaw), "rm -rf", "no redacted text below redacted")
				assert.NotContains(t, string(gotRaw), "ENOSPC", "no redacted text below redacted")
			}
		})
	}
}

func TestNoDataAboveTheCeilingLeaves(t *testing.T) {
	h := newHarness(t, nil, nil)
	var sent int
	for _, g := range aeptest.Golden(t) {
		if aep.IsCommand(g.Event.Type) {
			continue
		}
		require.Equal(t, http.StatusAccepted, h.post(g.Raw).status, g.Name())
		sent++
	}
	got := h.records()
	require.Len(t, got, sent)
	for _, r := range got {
		ev := r.event(t)
		assert.True(t, aep.CaptureMetadata.Allows(ev.EffectiveCapture()), "%s passed on at %s", ev.ID, ev.EffectiveCapture())
	}
}

// The golden stream POSTed in and converted back with the projection's
// inverse is the same events, byte for byte after canonical JSON, at a
// ceiling that down-levels nothing. Control commands are refused.
func TestGoldenRoundTrip(t *testing.T) {
	golden := aeptest.Golden(t)
	var sent, commands [][]byte
	for _, g := range golden {
		if aep.IsCommand(g.Event.Type) {
			commands = append(commands, g.Raw)
			continue
		}
		sent = append(sent, g.Raw)
	}
	require.Len(t, commands, 2, "golden holds control.attention.respond and control.cancel")
	full := func(c *Config) { c.Capture.Level = aep.CaptureFull }

	for _, tt := range []struct {
		name     string
		requests []request
	}{
		{name: "one batch", requests: []request{{contentType: "application/x-ndjson", body: ndjson(sent...)}}},
		{name: "one event per request", requests: singleEvents(sent)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, nil, full)
			for _, rq := range tt.requests {
				resp := h.do(rq)
				require.Equal(t, http.StatusAccepted, resp.status, "%s", resp.raw)
			}
			assertRoundTrip(t, sent, h.records())
		})
	}
	t.Run("commands are refused", func(t *testing.T) {
		h := newHarness(t, nil, nil, full)
		for _, raw := range commands {
			resp := h.do(request{contentType: "application/json", body: raw})
			assert.Equal(t, http.StatusBadRequest, resp.status)
			assert.Contains(t, resp.body["detail"], "AEP-0004 §4.1")
		}
		assert.Empty(t, h.records())
	})
}

func singleEvents(lines [][]byte) []request {
	out := make([]request, len(lines))
	for i, raw := range lines {
		out[i] = request{contentType: "application/json", body: raw}
	}
	return out
}

func assertRoundTrip(t *testing.T, sent [][]byte, got []receivedRecord) {
	t.Helper()
	require.Len(t, got, len(sent))
	for i, r := range got {
		back, err := r.event(t).MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, canonical(t, sent[i]), canonical(t, back), "event %d", i)
	}
}

// Auth through configauth: the distribution's bearertokenauth extension
// guards every path, and a refusal is a 401 that takes nothing.
func TestBearerTokenAuth(t *testing.T) {
	authID := component.MustNewID("bearertokenauth")
	host := bearerTokenHost(t, authID, "s3cret-token")
	h := newHarness(t, nil, host, func(c *Config) {
		c.Auth = authConfig(authID)
	})

	tests := []struct {
		name   string
		rq     request
		status int
	}{
		{name: "no token", rq: request{contentType: "application/json", body: toolRequested}, status: http.StatusUnauthorized},
		{name: "wrong token", rq: request{contentType: "application/json", token: "guess", body: toolRequested}, status: http.StatusUnauthorized},
		{name: "discovery without a token", rq: request{method: http.MethodGet, path: discoveryPath}, status: http.StatusUnauthorized},
		{name: "token", rq: request{contentType: "application/json", token: "s3cret-token", body: toolRequested}, status: http.StatusAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.records())
			resp := h.do(tt.rq)
			require.Equal(t, tt.status, resp.status, "%s", resp.raw)
			if tt.status == http.StatusUnauthorized {
				assert.Equal(t, "unauthorized", resp.body["error"])
				assert.Equal(t, "Bearer", resp.header.Get("WWW-Authenticate"))
				assert.NotContains(t, string(resp.raw), "s3cret-token")
				assert.Len(t, h.records(), before)
			}
		})
	}
}

func TestRefusalDetailNamesTheRule(t *testing.T) {
	h := newHarness(t, nil, nil)
	bad := bytes.Replace(runStarted, []byte(`"time":"2026-07-03T10:15:03.000Z"`), []byte(`"time":"yesterday"`), 1)
	resp := h.post(toolRequested, bad)
	require.Equal(t, http.StatusBadRequest, resp.status)
	detail, _ := resp.body["detail"].(string)
	assert.True(t, strings.HasPrefix(detail, "line 1: "), detail)
	assert.Contains(t, detail, "/time")
	assert.Contains(t, detail, "nothing was taken")
}

// With agents set, a body holding another agent's event is refused whole
// with 403, even when it also holds an invalid event.
func TestAgentsAllowList(t *testing.T) {
	codex := bytes.ReplaceAll(runStarted, []byte("claude-code"), []byte("openhands"))
	invalid := bytes.Replace(runStarted, []byte(`"seq":2,`), nil, 1)
	h := newHarness(t, nil, nil, func(c *Config) { c.Agents = []string{"claude-code"} })

	resp := h.post(toolRequested, invalid, codex)
	require.Equal(t, http.StatusForbidden, resp.status, "%s", resp.raw)
	assert.Equal(t, "forbidden", resp.body["error"])
	assert.EqualValues(t, 2, resp.body["line"])
	assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonAgent)))
	assert.Empty(t, h.records())

	require.Equal(t, http.StatusAccepted, h.post(toolRequested, runStarted).status)
	assert.Len(t, h.records(), 2)
}

// A body without a Content-Length is cut at max_request_body_size as it
// is read.
func TestChunkedBodyOverTheLimit(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *Config) { c.MaxRequestBodySize = 4096 })
	body := bytes.Repeat(ndjson(toolRequested), 30)
	// A reader of unknown length: the client sends it chunked.
	req, err := http.NewRequest(http.MethodPost, h.url+eventsPath, io.MultiReader(bytes.NewReader(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("AEP-Version", "0.1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_requests_refused", attribute.String("reason", requestTooLarge)))
	assert.Empty(t, h.records())
}

// A batch of newlines is refused as its lines pass max_batch_events, as
// the body streams in: what the handler allocates stays far below the body
// it refuses (the lines were once split before they were counted, 24
// bytes of slice header per newline, 20 MiB of them 480 MB).
func TestTooManyEventsIsRefusedWhileReading(t *testing.T) {
	const bodySize = 8 << 20
	h := newHarness(t, nil, nil, func(c *Config) { c.MaxRequestBodySize = bodySize })
	body := bytes.Repeat([]byte("\n"), bodySize)
	for _, tt := range []struct {
		name     string
		declared bool
		// bound is what the handler may allocate: a declared length is
		// read into one buffer of that length, an undeclared one grows.
		bound uint64
	}{
		{name: "declared length", declared: true, bound: bodySize + bodySize/4},
		{name: "chunked", bound: bodySize / 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, eventsPath, nil)
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = -1
			if tt.declared {
				req.ContentLength = bodySize
			}
			req.Header.Set("Content-Type", "application/x-ndjson")
			req.Header.Set("AEP-Version", aep.Version)
			rec := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			h.rcv.handleEvents(rec, req)
			runtime.ReadMemStats(&after)
			require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
			assert.Contains(t, rec.Body.String(), "too-many-events")
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, tt.bound,
				"bytes allocated to refuse %d newlines", bodySize)
		})
	}
	assert.Equal(t, int64(2), h.counter("otelcol_aepreceiver_requests_refused", attribute.String("reason", requestTooManyEvents)))
}

// A gzip body is bounded as it is decompressed: 8 KB of gzip that expand
// to 8 MiB of newlines are refused (413 too-many-events) having allocated
// a fraction of what they expand to.
func TestGzipBatchIsRefusedWhileDecompressing(t *testing.T) {
	const bodySize = 8 << 20
	h := newHarness(t, nil, nil, func(c *Config) { c.MaxRequestBodySize = bodySize })
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(bytes.Repeat([]byte("\n"), bodySize))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	req, err := http.NewRequest(http.MethodPost, h.url+eventsPath, bytes.NewReader(gz.Bytes()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("AEP-Version", aep.Version)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", raw)
	assert.Contains(t, string(raw), "too-many-events")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(bodySize/4), "bytes allocated to refuse %d KB of gzip", gz.Len()>>10)
}
