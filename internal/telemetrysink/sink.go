// Package telemetrysink receives what the aep connector emits, for tests
// and the demo: an OTLP/HTTP traces endpoint on loopback that keeps every
// span, and a reader of the prometheus exporter's text exposition.
package telemetrysink

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// maxBody bounds one export the sink accepts.
const maxBody = 64 << 20

// Traces is an OTLP/HTTP traces endpoint (protobuf, plain or gzip) on
// 127.0.0.1.
type Traces struct {
	srv *http.Server
	url string

	mu      sync.Mutex
	spans   []ptrace.Span
	refused []string
}

// StartTraces listens on an ephemeral loopback port.
func StartTraces() (*Traces, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("traces sink: %w", err)
	}
	s := &Traces{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP)}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// URL is the base URL; exporters post to URL()+"/v1/traces".
func (s *Traces) URL() string { return s.url }

// Close stops the endpoint.
func (s *Traces) Close() error { return s.srv.Close() }

func (s *Traces) serveHTTP(w http.ResponseWriter, r *http.Request) {
	spans, status, err := decodeTraces(r)
	if err != nil {
		s.mu.Lock()
		s.refused = append(s.refused, err.Error())
		s.mu.Unlock()
		http.Error(w, err.Error(), status)
		return
	}
	s.mu.Lock()
	s.spans = append(s.spans, spans...)
	s.mu.Unlock()
	WriteResponse(w, ptraceotlp.NewExportResponse().MarshalProto)
}

func decodeTraces(r *http.Request) ([]ptrace.Span, int, error) {
	raw, status, err := ReadExport(r, "/v1/traces")
	if err != nil {
		return nil, status, err
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(raw); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("decode OTLP traces export: %w", err)
	}
	var out []ptrace.Span
	for _, rs := range req.Traces().ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				out = append(out, span)
			}
		}
	}
	return out, http.StatusOK, nil
}

// ReadExport reads the body of one OTLP/HTTP protobuf export POSTed to
// path, plain or gzip, or says why it is refused and with which status.
func ReadExport(r *http.Request, path string) ([]byte, int, error) {
	if r.Method != http.MethodPost || r.URL.Path != path {
		return nil, http.StatusNotFound, fmt.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content type %q is not protobuf", ct)
	}
	var body io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("open gzip body: %w", err)
		}
		defer gz.Close()
		body = gz
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content encoding %q", enc)
	}
	raw, err := io.ReadAll(io.LimitReader(body, maxBody))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("read export body: %w", err)
	}
	return raw, http.StatusOK, nil
}

// WriteResponse answers an accepted export with the marshalled response.
func WriteResponse(w http.ResponseWriter, marshal func() ([]byte, error)) {
	resp, err := marshal()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// Spans returns every span received so far, in arrival order.
func (s *Traces) Spans() []ptrace.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ptrace.Span(nil), s.spans...)
}

// Refused returns why exports were refused, if any were.
func (s *Traces) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}

// Samples are a prometheus scrape: "name{labels}" → value.
type Samples map[string]float64

// Scrape reads the text exposition at url.
func Scrape(url string) (Samples, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	samples := make(Samples)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			samples[line[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return samples, nil
}

// Sum adds the samples of metric whose labels include each name, value
// pair given; false when there is none.
func (s Samples) Sum(metric string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for key, v := range s {
		name, rest, _ := strings.Cut(key, "{")
		if name != metric {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(rest, labels[i]+`="`+labels[i+1]+`"`) {
				match = false
			}
		}
		if match {
			sum, found = sum+v, true
		}
	}
	return sum, found
}
