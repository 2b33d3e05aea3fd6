// Package telemetrysink receives what a collector exports, for the tests,
// the demo and the benchmark: OTLP/HTTP traces and logs endpoints on
// loopback, and a reader of the prometheus exporter's text exposition.
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
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// maxBody bounds one export the sink accepts.
const maxBody = 64 << 20

// endpoint is an OTLP/HTTP endpoint on 127.0.0.1 for one signal: it
// refuses, and keeps why, what is not a protobuf export POSTed to path;
// accept takes the body of the rest, and refuses it by returning an error.
type endpoint struct {
	srv      *http.Server
	url      string
	path     string
	accept   func(raw []byte) error
	response func() ([]byte, error)

	mu      sync.Mutex
	refused []string
}

// listen serves an endpoint on an ephemeral loopback port.
func listen(path string, accept func(raw []byte) error, response func() ([]byte, error)) (*endpoint, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s sink: %w", path, err)
	}
	e := &endpoint{url: "http://" + l.Addr().String(), path: path, accept: accept, response: response}
	e.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(e.serveHTTP)}
	go func() { _ = e.srv.Serve(l) }()
	return e, nil
}

// URL is the base URL; exporters post to URL() + "/v1/traces" or "/v1/logs".
func (e *endpoint) URL() string { return e.url }

// Close stops the endpoint.
func (e *endpoint) Close() error { return e.srv.Close() }

// Refused returns why exports were refused, if any were.
func (e *endpoint) Refused() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.refused...)
}

func (e *endpoint) serveHTTP(w http.ResponseWriter, r *http.Request) {
	raw, status, err := readExport(r, e.path)
	if err == nil {
		if err = e.accept(raw); err != nil {
			status = http.StatusBadRequest
		}
	}
	if err != nil {
		e.mu.Lock()
		e.refused = append(e.refused, err.Error())
		e.mu.Unlock()
		http.Error(w, err.Error(), status)
		return
	}
	writeResponse(w, e.response)
}

// Traces is an OTLP/HTTP traces endpoint (protobuf, plain or gzip) on
// 127.0.0.1 that keeps every span.
type Traces struct {
	*endpoint

	mu    sync.Mutex
	spans []ptrace.Span
}

// StartTraces listens on an ephemeral loopback port.
func StartTraces() (*Traces, error) {
	s := &Traces{}
	var err error
	if s.endpoint, err = listen("/v1/traces", s.accept, ptraceotlp.NewExportResponse().MarshalProto); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Traces) accept(raw []byte) error {
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(raw); err != nil {
		return fmt.Errorf("decode OTLP traces export: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.Traces().ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				s.spans = append(s.spans, span)
			}
		}
	}
	return nil
}

// readExport reads the body of one OTLP/HTTP protobuf export POSTed to
// path, plain or gzip, or says why it is refused and with which status.
func readExport(r *http.Request, path string) ([]byte, int, error) {
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

// writeResponse answers an accepted export with the marshalled response.
func writeResponse(w http.ResponseWriter, marshal func() ([]byte, error)) {
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
