package telemetrysink

import (
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
)

// Logs is an OTLP/HTTP logs endpoint (protobuf, plain or gzip) on
// 127.0.0.1. It keeps every export, or hands each to a consumer as it
// arrives.
type Logs struct {
	*endpoint
	consume func(plog.Logs)

	mu      sync.Mutex
	exports []plog.Logs
}

// LogRecord is one exported log record with its resource.
type LogRecord struct {
	Record   plog.LogRecord
	Resource pcommon.Resource
}

// StartLogs listens on an ephemeral loopback port. consume, when not nil,
// takes each accepted export as it arrives, and the sink keeps nothing.
func StartLogs(consume func(plog.Logs)) (*Logs, error) {
	s := &Logs{consume: consume}
	var err error
	if s.endpoint, err = listen("/v1/logs", s.accept, plogotlp.NewExportResponse().MarshalProto); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Logs) accept(raw []byte) error {
	req := plogotlp.NewExportRequest()
	if err := req.UnmarshalProto(raw); err != nil {
		return fmt.Errorf("decode OTLP logs export: %w", err)
	}
	if s.consume != nil {
		s.consume(req.Logs())
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exports = append(s.exports, req.Logs())
	return nil
}

// Records returns every record kept so far, in arrival order.
func (s *Logs) Records() []LogRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LogRecord
	for _, logs := range s.exports {
		for _, rl := range logs.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					out = append(out, LogRecord{Record: lr, Resource: rl.Resource()})
				}
			}
		}
	}
	return out
}
