package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrysink"
)

// otlpSink is an OTLP/HTTP logs endpoint on loopback that decodes every
// protobuf export and keeps its records.
type otlpSink struct {
	srv *httptest.Server

	mu      sync.Mutex
	exports []plog.Logs
	refused []string // why requests were refused; a test asserts it is empty
}

func startOTLPSink(tb testing.TB) *otlpSink {
	tb.Helper()
	s := &otlpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	tb.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL the otlphttp exporter appends /v1/logs to.
func (s *otlpSink) URL() string { return s.srv.URL }

func (s *otlpSink) serveHTTP(w http.ResponseWriter, r *http.Request) {
	logs, status, err := decodeExport(r)
	if err != nil {
		s.mu.Lock()
		s.refused = append(s.refused, err.Error())
		s.mu.Unlock()
		http.Error(w, err.Error(), status)
		return
	}
	s.mu.Lock()
	s.exports = append(s.exports, logs)
	s.mu.Unlock()
	telemetrysink.WriteResponse(w, plogotlp.NewExportResponse().MarshalProto)
}

// decodeExport reads one OTLP/HTTP protobuf logs export, gzip or plain.
func decodeExport(r *http.Request) (plog.Logs, int, error) {
	raw, status, err := telemetrysink.ReadExport(r, "/v1/logs")
	if err != nil {
		return plog.Logs{}, status, err
	}
	req := plogotlp.NewExportRequest()
	if err := req.UnmarshalProto(raw); err != nil {
		return plog.Logs{}, http.StatusBadRequest, fmt.Errorf("decode OTLP logs export: %w", err)
	}
	return req.Logs(), http.StatusOK, nil
}

// otlpRecord is one exported log record with its resource.
type otlpRecord struct {
	record   plog.LogRecord
	resource pcommon.Resource
}

// records returns every record received so far, in arrival order.
func (s *otlpSink) records() []otlpRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []otlpRecord
	for _, logs := range s.exports {
		for _, rl := range logs.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					out = append(out, otlpRecord{record: lr, resource: rl.Resource()})
				}
			}
		}
	}
	return out
}

// refusals returns why the sink refused requests, if it did.
func (s *otlpSink) refusals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}
