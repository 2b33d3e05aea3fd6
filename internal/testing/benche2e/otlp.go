package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrysink"
)

// otlpEvery is how often the OTLP load sends what is due: the plain
// pipeline gets the same events per second in requests of rate/100
// records, about what our receiver reads per conversation socket.
const otlpEvery = 10 * time.Millisecond

// startOTLPSink is the plain pipeline's otlp_http destination: it times
// each record from its timestamp, the moment it was generated, as the
// export arrives.
func startOTLPSink() (*telemetrysink.Logs, *recorder, error) {
	rec := &recorder{}
	sink, err := telemetrysink.StartLogs(func(ld plog.Logs) {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					rec.add(lr.Timestamp().AsTime())
				}
			}
		}
	})
	return sink, rec, err
}

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
