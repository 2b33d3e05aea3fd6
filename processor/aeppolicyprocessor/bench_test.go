package aeppolicyprocessor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
)

// BenchmarkConsumeLogs judges one tool request per batch, as the openhands
// receiver hands them on, over 100 sessions, with and without storage:
// the cost the processor adds per event.
func BenchmarkConsumeLogs(b *testing.B) {
	for _, storage := range []bool{false, true} {
		b.Run(fmt.Sprintf("storage=%v", storage), func(b *testing.B) {
			host := hosttest.Extensions{fileStorageID: hosttest.FileStorage(b, b.TempDir())}
			cfg := createDefaultConfig().(*Config)
			if storage {
				cfg.Storage = &fileStorageID
			}
			p, err := newProcessor(component.NewID(componentType), cfg, componenttest.NewNopTelemetrySettings(), consumertest.NewNop())
			require.NoError(b, err)
			require.NoError(b, p.Start(context.Background(), host))
			b.Cleanup(func() { require.NoError(b, p.Shutdown(context.Background())) })
			owners := make([]owner, 100)
			batches := make([]plog.Logs, 1000)
			for i := range batches {
				o := &owners[i%len(owners)]
				ev := o.event("tool.requested", t0, toolRequest(i))
				ev.Session = fmt.Sprintf("conv-%d", i%len(owners))
				batches[i] = logsOf(b, ev)
			}
			b.ResetTimer()
			for i := range b.N {
				ld := plog.NewLogs()
				batches[i%len(batches)].CopyTo(ld)
				if err := p.ConsumeLogs(context.Background(), ld); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func toolRequest(i int) map[string]any {
	return map[string]any{"tool": map[string]any{"name": "terminal", "call_id": fmt.Sprint(i)}, "args_digest": fmt.Sprintf("sha256:%d", i%7)}
}
