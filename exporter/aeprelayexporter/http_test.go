package aeprelayexporter

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
)

func httpConfig(endpoint string) *Config {
	cfg := testConfig(endpoint)
	cfg.Transport = TransportHTTP
	return cfg
}

// startHTTPExporter starts an exporter posting to relay with its token.
func startHTTPExporter(t *testing.T, relay *aeprelaytest.Relay) *harness {
	t.Helper()
	cfg := httpConfig(relay.URL())
	cfg.Token = relayToken
	return startExporter(t, cfg, nil)
}

// BenchmarkPushHTTP measures delivery over loopback to the test relay:
// batches of 100 events, one POST each.
func BenchmarkPushHTTP(b *testing.B) {
	relay := startRelay(b, aeprelaytest.Config{})
	cfg := httpConfig(relay.URL())
	cfg.Token = relayToken
	benchmarkPush(b, cfg)
}

func TestHTTPDelivers(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startHTTPExporter(t, relay)
	events := append(sessionEvents("s1", 3), sessionEvents("s2", 3)...)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))

	assert.Equal(t, ids(events), relayIDs(relay))
	for _, rec := range relay.Events() {
		assert.Equal(t, aeprelaytest.BindingPOST, rec.Binding)
	}
	requireNoViolations(t, relay)
	assert.Equal(t, int64(len(events)), h.counter(t, "otelcol_aeprelay_events_sent", attribute.String("transport", "http")))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_batches_confirmed"))
	status, _ := h.host.lastStatus()
	assert.Equal(t, componentstatus.StatusOK, status)
}

func TestHTTPSplitsOn413(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{MaxBatch: 3})
	h := startHTTPExporter(t, relay)
	events := sessionEvents("s1", 10)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))

	assert.Equal(t, ids(events), relayIDs(relay), "the halves go in order")
	assert.Equal(t, len(events), relay.Received(), "a refused batch ingests nothing")
	requireNoViolations(t, relay)
}

func TestHTTPDropsAnEventTooLargeAlone(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{MaxBody: 1024})
	h := startHTTPExporter(t, relay)
	events := sessionEvents("s1", 3)
	require.NoError(t, events[1].SetExtension("acmenote", strings.Repeat("x", 2048)))

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))

	assert.Equal(t, []string{events[0].ID, events[2].ID}, relayIDs(relay))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_rejected",
		attribute.String("reason", reasonTooLarge), attribute.String("code", "payload-too-large")))
	entries := h.logged("the AEP relay refused an event; dropping it, never resending it")
	require.Len(t, entries, 1)
	assert.Equal(t, events[1].ID, entries[0].ContextMap()["id"])
}

// refusingRelay accepts NDJSON batches unless they hold the poisoned id:
// those get status (400 unless set), with the 0-based line of the poison
// when lineHint says so (shifted by lineShift, to play a relay that counts
// differently). A 207 plays a per-line report of a shape we cannot read,
// for every POST: the rest of a batch is accepted, and a batch without the
// poison gets a report naming no error. Admission dedupes on id.
type refusingRelay struct {
	poison    string
	lineHint  bool
	lineShift int
	status    int

	mu       sync.Mutex
	accepted []string
	posts    int
}

func (r *refusingRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var batch []string
	scanner := bufio.NewScanner(req.Body)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		var ev struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(scanner.Bytes(), &ev) != nil {
			http.Error(w, "bad line", http.StatusBadRequest)
			return
		}
		batch = append(batch, ev.ID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	if i := slices.Index(batch, r.poison); i >= 0 {
		body := map[string]any{"error": "invalid-event", "detail": "refused by test"}
		if r.lineHint {
			body["line"] = i + r.lineShift
		}
		status := cmp.Or(r.status, http.StatusBadRequest)
		if status == http.StatusMultiStatus {
			r.admit(slices.Delete(batch, i, i+1))
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
		return
	}
	r.admit(batch)
	if r.status == http.StatusMultiStatus {
		w.WriteHeader(http.StatusMultiStatus) // a report that names no error
		_, _ = w.Write([]byte(`{}`))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// admit records ids not seen before, as a relay's admission dedupe does.
func (r *refusingRelay) admit(ids []string) {
	for _, id := range ids {
		if !slices.Contains(r.accepted, id) {
			r.accepted = append(r.accepted, id)
		}
	}
}

func TestHTTPDropsTheEventTheRelayRefuses(t *testing.T) {
	tests := []struct {
		name     string
		events   int
		lineHint bool
		shift    int
		status   int
	}{
		{name: "single_event", events: 1},
		{name: "batch_bisected", events: 9},
		{name: "batch_with_line_hint", events: 9, lineHint: true},
		{name: "batch_with_off_by_one_line_hint", events: 9, lineHint: true, shift: 1},
		{name: "multi_status", events: 9, status: http.StatusMultiStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := sessionEvents("s1", tt.events)
			at := len(events) / 2
			poison := events[at]
			rest := slices.Delete(slices.Clone(events), at, at+1)
			relay := &refusingRelay{poison: poison.ID, lineHint: tt.lineHint, lineShift: tt.shift, status: tt.status}
			srv := httptest.NewServer(relay)
			t.Cleanup(srv.Close)
			h := startExporter(t, httpConfig(srv.URL), nil)

			require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))

			relay.mu.Lock()
			defer relay.mu.Unlock()
			assert.Equal(t, ids(rest), relay.accepted, "every other event goes, in order")
			assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_rejected",
				attribute.String("reason", reasonRelayRefused), attribute.String("code", "invalid-event")))
			entries := h.logged("the AEP relay refused an event; dropping it, never resending it")
			require.Len(t, entries, 1)
			assert.Equal(t, poison.ID, entries[0].ContextMap()["id"])
			assert.Equal(t, poison.Type, entries[0].ContextMap()["type"])
			assert.Equal(t, "refused by test", entries[0].ContextMap()["detail"])
			assert.Equal(t, int64(len(rest)), h.counter(t, "otelcol_aeprelay_events_sent"), "sent + rejected = emitted")
		})
	}
}

func TestHTTPRelayRefusalIsACountedRejection(t *testing.T) {
	var refusals atomic.Int64
	relay := startRelay(t, aeprelaytest.Config{Refuse: refuseSeq(4, &refusals)})
	h := startHTTPExporter(t, relay)
	events := sessionEvents("s1", 10)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, events...)))

	assert.Equal(t, ids(slices.Delete(slices.Clone(events), 4, 5)), relayIDs(relay), "the other nine are accepted, in order")
	requireRelayRefusal(t, h, "http", events[4], len(events))
	requireNoViolations(t, relay)
}

// statusRelay answers every POST with code and body, counting them.
func statusRelay(t *testing.T, code int, body string) (*httptest.Server, *int) {
	t.Helper()
	var mu sync.Mutex
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		posts++
		mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &posts
}

func TestHTTPPermanentStatuses(t *testing.T) {
	tests := []struct {
		name string
		code int
		body string
		want string
	}{
		{"415", http.StatusUnsupportedMediaType, `{"error":"unsupported-media-type"}`, "refused Content-Type application/x-ndjson (HTTP 415)"},
		{"426", http.StatusUpgradeRequired, `{"versions":["1.0"]}`, "does not speak AEP 0.1 (HTTP 426; it supports [1.0])"},
		{"404", http.StatusNotFound, `not found`, "answered HTTP 404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, posts := statusRelay(t, tt.code, tt.body)
			h := startExporter(t, withRetry(httpConfig(srv.URL)), nil)

			err := h.consume(t, aeptest.LogsOf(t, sessionEvents("s1", 4)...))
			require.Error(t, err)
			assert.True(t, consumererror.IsPermanent(err), "want permanent, got %v", err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, 1, *posts, "a permanent refusal is neither retried nor split")
			status, _ := h.host.lastStatus()
			assert.Equal(t, componentstatus.StatusPermanentError, status)
		})
	}
}

// flakyRelay fails the first failures POSTs with code, then accepts.
type flakyRelay struct {
	code, failures int

	mu       sync.Mutex
	posts    int
	accepted int
}

func (f *flakyRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(req.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.posts++
	if f.posts <= f.failures {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(f.code)
		return
	}
	f.accepted += bytes.Count(body.Bytes(), []byte("\n"))
	w.WriteHeader(http.StatusAccepted)
}

func TestHTTPRetriesServerErrors(t *testing.T) {
	for _, code := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			relay := &flakyRelay{code: code, failures: 2}
			srv := httptest.NewServer(relay)
			t.Cleanup(srv.Close)

			noRetry := startExporter(t, httpConfig(srv.URL), nil)
			err := noRetry.consume(t, aeptest.LogsOf(t, newEvent("s1", 0)))
			require.Error(t, err)
			assert.False(t, consumererror.IsPermanent(err), "HTTP %d must be retryable: %v", code, err)
			status, _ := noRetry.host.lastStatus()
			assert.Equal(t, componentstatus.StatusRecoverableError, status)

			retrying := startExporter(t, withRetry(httpConfig(srv.URL)), nil)
			require.NoError(t, retrying.consume(t, aeptest.LogsOf(t, sessionEvents("s1", 2)...)))
			relay.mu.Lock()
			defer relay.mu.Unlock()
			assert.Equal(t, 3, relay.posts)
			assert.Equal(t, 2, relay.accepted)
		})
	}
}

func TestHTTPNetworkErrorIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	endpoint := srv.URL
	srv.Close() // nothing listens there any more
	h := startExporter(t, httpConfig(endpoint), nil)
	err := h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0)))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
}

// TestRetryCarriesOnlyWhatIsLeft: after the relay settled part of a push,
// a retryable failure hands exporterhelper only the records still to go,
// never the skipped, the dropped or the accepted ones.
func TestRetryCarriesOnlyWhatIsLeft(t *testing.T) {
	events := sessionEvents("s1", 4)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(req.Body)
		mu.Lock()
		defer mu.Unlock()
		switch lines := bytes.Count(body.Bytes(), []byte("\n")); {
		case lines > 2:
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		case bytes.Contains(body.Bytes(), []byte(events[2].ID)):
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	h := startExporter(t, httpConfig(srv.URL), nil)
	ld := aeptest.LogsOf(t, events...)
	appendForeignRecord(ld)

	err := h.consume(t, ld)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	var left consumererror.Logs
	require.True(t, errors.As(err, &left), "want the records still to go, got %v", err)
	out := converter{}.convert(left.Data())
	assert.Empty(t, out.skipped)
	require.Len(t, out.events, 2)
	assert.Equal(t, []string{events[2].ID, events[3].ID}, []string{out.events[0].id, out.events[1].id})
}

func TestHTTPSendsTheBindingHeaders(t *testing.T) {
	var got http.Header
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		got = req.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	cfg := httpConfig(srv.URL)
	cfg.Token = "tkn"
	h := startExporter(t, cfg, nil)

	require.NoError(t, h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0))))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, aep.Version, got.Get("AEP-Version"))
	assert.Equal(t, "application/x-ndjson", got.Get("Content-Type"))
	assert.Equal(t, "Bearer tkn", got.Get("Authorization"))
}

func TestHTTPSkipsAndDropsWithoutFailingThePush(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	h := startHTTPExporter(t, relay)
	invalid := newEvent("s1", 1)
	invalid.Seq = nil
	ld := aeptest.LogsOf(t, newEvent("s1", 0), invalid, newEvent("s1", 2))
	appendForeignRecord(ld)

	require.NoError(t, h.consume(t, ld))
	assert.Equal(t, []string{"ev-s1-0000", "ev-s1-0002"}, relayIDs(relay))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_skipped"))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aeprelay_events_rejected", attribute.String("reason", reasonInvalid)))
	require.Len(t, h.logged("skipping log records that are not AEP events (no dev.aep. event_name)"), 1)
	entries := h.logged("dropping an AEP event that can never be sent")
	require.Len(t, entries, 1)
	assert.Equal(t, "ev-s1-0001", entries[0].ContextMap()["id"])
	assert.Equal(t, "run.started", entries[0].ContextMap()["type"])
}
