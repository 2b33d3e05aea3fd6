package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
)

// core reads AEP events back from log records and tracks the operations
// they end; the traces and metrics halves each own one.
type core struct {
	tel *telemetry

	mu      sync.Mutex
	tracker *tracker
}

// newCore builds the shared core; countCalls keeps runs' call counts.
func newCore(cfg *Config, set component.TelemetrySettings, countCalls bool) (*core, error) {
	tel, err := newTelemetry(set)
	if err != nil {
		return nil, err
	}
	c := &core{tel: tel}
	c.tracker = newTracker(cfg.OpenSpans, func(reason string) {
		tel.evicted.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", reason)))
	})
	c.tracker.countCalls = countCalls
	return c, nil
}

// visitFunc sees each AEP event of resource logs i, at its time, with the
// operations it ends (none for most events; a run's terminal ends the run
// and any of its calls left unanswered).
type visitFunc func(i int, ev *aep.Event, at time.Time, ops []*operation)

// consume decodes every record of ld in order; records that are not AEP
// events are counted and skipped.
func (c *core) consume(ctx context.Context, ld plog.Logs, visit visitFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tracker.sweep()
	for i, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				ev, err := projection.FromLogRecord(lr, rl.Resource())
				if err != nil {
					reason := "invalid"
					if errors.Is(err, projection.ErrNotAEP) {
						reason = "not_aep"
					}
					c.tel.ignore(ctx, reason)
					continue
				}
				at := lr.Timestamp().AsTime()
				visit(i, ev, at, c.tracker.observe(ev, at))
			}
		}
	}
}
