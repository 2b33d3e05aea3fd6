package telemetrysink

import (
	"bytes"
	"net/http"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
)

func post(t *testing.T, url, contentType string, body []byte) int {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func oneRecord(t *testing.T) []byte {
	t.Helper()
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("hello")
	raw, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestLogs(t *testing.T) {
	t.Run("keeps records and refuses what is no export", func(t *testing.T) {
		s, err := StartLogs(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := post(t, s.URL()+"/v1/logs", "application/x-protobuf", oneRecord(t)); got != http.StatusOK {
			t.Fatalf("export: HTTP %d", got)
		}
		if got := post(t, s.URL()+"/v1/logs", "application/x-protobuf", []byte("not protobuf")); got != http.StatusBadRequest {
			t.Errorf("garbage: HTTP %d, want 400", got)
		}
		if got := post(t, s.URL()+"/v1/traces", "application/x-protobuf", oneRecord(t)); got != http.StatusNotFound {
			t.Errorf("wrong path: HTTP %d, want 404", got)
		}
		recs := s.Records()
		if len(recs) != 1 || recs[0].Record.Body().Str() != "hello" {
			t.Errorf("records = %v, want the one exported", recs)
		}
		if got := len(s.Refused()); got != 2 {
			t.Errorf("%d refusals, want 2: %v", got, s.Refused())
		}
	})
	t.Run("hands exports to the consumer", func(t *testing.T) {
		var consumed atomic.Int64
		s, err := StartLogs(func(ld plog.Logs) { consumed.Add(int64(ld.LogRecordCount())) })
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := post(t, s.URL()+"/v1/logs", "application/x-protobuf", oneRecord(t)); got != http.StatusOK {
			t.Fatalf("export: HTTP %d", got)
		}
		if consumed.Load() != 1 || len(s.Records()) != 0 {
			t.Errorf("consumed %d, kept %d; want 1 consumed, none kept", consumed.Load(), len(s.Records()))
		}
	})
}
