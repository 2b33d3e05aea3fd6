package aepfileexporter

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

// BenchmarkPushLogs writes pushes of 100 events over 10 sessions, as the
// exporter's push function sees them after exporterhelper.
func BenchmarkPushLogs(b *testing.B) {
	for _, policy := range []FsyncPolicy{FsyncNone, FsyncEveryBatch} {
		b.Run(string(policy), func(b *testing.B) {
			cfg := testConfig(b.TempDir())
			cfg.Fsync = policy
			e := startBenchExporter(b, cfg)
			const perPush, sessions = 100, 10
			pushes := make([]plog.Logs, 0, b.N)
			for i := range b.N {
				events := make([]*aep.Event, perPush)
				for j := range events {
					seq := i*perPush/sessions + j/sessions
					events[j] = newEvent(fmt.Sprintf("s%d", j%sessions), int64(seq))
				}
				pushes = append(pushes, aeptest.LogsOf(b, events...))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for _, ld := range pushes {
				if err := e.pushLogs(context.Background(), ld); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perPush), "ns/event")
		})
	}
}

// BenchmarkReopenForTheBound writes two long sessions in turn through one
// descriptor (max_open_files: 1): each event closes one log and reopens
// the other, whose dedup state comes back from what the close kept, not
// from reading the log again.
func BenchmarkReopenForTheBound(b *testing.B) {
	const sessionLen = 20000
	cfg := testConfig(b.TempDir())
	cfg.Fsync = FsyncNone
	cfg.MaxOpenFiles = 1
	e := startBenchExporter(b, cfg)
	for _, session := range []string{"s0", "s1"} {
		if err := e.pushLogs(context.Background(), aeptest.LogsOf(b, sessionEvents(session, 0, sessionLen)...)); err != nil {
			b.Fatal(err)
		}
	}
	pushes := make([]plog.Logs, 0, b.N)
	for i := range b.N {
		pushes = append(pushes, aeptest.LogsOf(b, newEvent(fmt.Sprintf("s%d", i%2), int64(sessionLen+i/2))))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, ld := range pushes {
		if err := e.pushLogs(context.Background(), ld); err != nil {
			b.Fatal(err)
		}
	}
}

// startBenchExporter starts the push function of cfg without
// exporterhelper, shut down when the benchmark ends.
func startBenchExporter(b *testing.B, cfg *Config) *fileExporter {
	b.Helper()
	e, err := newFileExporter(cfg, exportertest.NewNopSettings(componentType))
	if err != nil {
		b.Fatal(err)
	}
	if err := e.start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.shutdown(context.Background()) })
	return e
}
