package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
)

// otlpEvery is how often the OTLP load sends what is due: the plain
// pipeline gets the same events per second in requests of rate/100
// records, about what our receiver reads per conversation socket.
const otlpEvery = 10 * time.Millisecond

// otlpSink is the plain pipeline's otlp_http destination: it decodes every
// request and times each record from its timestamp, the moment it was
// generated.
type otlpSink struct {
	rec *recorder
	srv *http.Server
	url string
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{rec: &recorder{}, url: "http://" + ln.Addr().String()}
	ok, err := plogotlp.NewExportResponse().MarshalProto()
	if err != nil {
		return nil, err
	}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" { // otlp_http's default
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			in = zr
		}
		body, err := io.ReadAll(in)
		req := plogotlp.NewExportRequest()
		if err == nil {
			err = req.UnmarshalProto(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rl := range req.Logs().ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					s.rec.add(lr.Timestamp().AsTime())
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(ok)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) close() { _ = s.srv.Close() }

// loadOTLP posts log records made by records (n of them, numbered from
// first) to endpoint at rate per second for d, and returns how many it
// sent.
func loadOTLP(ctx context.Context, endpoint string, rate float64, d time.Duration, records func(n, first int) plog.Logs) (int, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	ticker := time.NewTicker(otlpEvery)
	defer ticker.Stop()
	start := time.Now()
	sent := 0
	for {
		elapsed := min(time.Since(start), d)
		if due := int(rate*elapsed.Seconds()) - sent; due > 0 {
			if err := postLogs(ctx, client, endpoint, records(due, sent)); err != nil {
				return sent, err
			}
			sent += due
		}
		if elapsed == d {
			return sent, nil
		}
		select {
		case <-ctx.Done():
			return sent, ctx.Err()
		case <-ticker.C:
		}
	}
}

// toolRecords are n log records shaped like our tool events, numbered
// from first: the plain pipeline's load.
func toolRecords(n, first int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "openhands")
	records := rl.ScopeLogs().AppendEmpty().LogRecords()
	now := pcommon.NewTimestampFromTime(time.Now())
	for i := range n {
		lr := records.AppendEmpty()
		lr.SetTimestamp(now)
		lr.SetEventName("dev.aep.tool.completed")
		lr.SetSeverityText("INFO")
		attrs := lr.Attributes()
		attrs.PutStr("aep.event_id", fmt.Sprintf("01K%023d", first+i))
		attrs.PutStr("aep.session_id", "5f1c2e0a-7c4b-4d4e-9a55-0c7f2b1f3e21")
		attrs.PutStr("aep.source", "aep://otelcol/agent/openhands/session/5f1c2e0a-7c4b-4d4e-9a55-0c7f2b1f3e21")
		attrs.PutInt("aep.sequence", int64(first+i))
		body := lr.Body().SetEmptyMap()
		tool := body.PutEmptyMap("tool")
		tool.PutStr("name", "terminal")
		tool.PutStr("call_id", "toolu_01")
		body.PutStr("status", "ok")
		body.PutStr("vendor_event_id", "8c2e5a3b-1d4f-4e6a-9b7c-2f1e0d3c4b5a")
		body.PutStr("vendor_ts", now.AsTime().UTC().Format(vendorTimeLayout))
	}
	return ld
}

func postLogs(ctx context.Context, client *http.Client, endpoint string, ld plog.Logs) error {
	raw, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post OTLP logs: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("post OTLP logs: HTTP %d", resp.StatusCode)
	}
	return nil
}
