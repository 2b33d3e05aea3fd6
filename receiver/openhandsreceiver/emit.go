package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
)

const scopeName = "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

// sessionEmitter is the one sequencer of a session's (epoch, seq), held in
// the session's durable state (pos), and turns its AEP events into log
// records: one ResourceLogs per conversation.
type sessionEmitter struct {
	next     consumer.Logs
	resource pcommon.Resource // template, copied into every batch
	pos      *position
	retry    backoff.Config
	tel      *telemetry
	logger   *zap.Logger
}

// batch assigns each event its position and projects it to a log record,
// all in one ResourceLogs. This is the only place that assigns seq:
// positions follow emission order, strictly increasing within the epoch,
// with no gap: an event the projection refuses takes none.
func (e *sessionEmitter) batch(events []*aep.Event) plog.Logs {
	return e.project(events, true)
}

// records projects already positioned events to log records, unchanged:
// a recorded control ack re-sent byte-identically.
func (e *sessionEmitter) records(events []*aep.Event) plog.Logs {
	return e.project(events, false)
}

func (e *sessionEmitter) project(events []*aep.Event, assign bool) plog.Logs {
	logs := plog.NewLogs()
	if len(events) == 0 {
		return logs
	}
	rl := logs.ResourceLogs().AppendEmpty()
	e.resource.CopyTo(rl.Resource())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(scopeName)
	records := sl.LogRecords()
	records.EnsureCapacity(len(events))
	observed := pcommon.NewTimestampFromTime(time.Now())
	for _, ev := range events {
		if assign {
			ev.Epoch, ev.Seq = aep.Int64(e.pos.Epoch), aep.Int64(e.pos.NextSeq)
		}
		lr := records.AppendEmpty()
		if err := projection.ToLogRecord(ev, lr, projection.Options{}); err != nil {
			// The mapper built an event the projection refuses: a bug (what
			// the projection cannot carry is made text or a stand-in when
			// decoded), but one event must not stop the session. Its
			// record, partly written, goes.
			records.RemoveIf(func(r plog.LogRecord) bool { return r == lr })
			if assign {
				ev.Seq = nil
			}
			e.tel.refused.Add(context.Background(), 1)
			e.logger.Error("dropping an AEP event the projection refused; it takes no seq",
				zap.String("aep.type", ev.Type), zap.String("aep.id", ev.ID), zap.Error(err))
			continue
		}
		if assign {
			e.pos.NextSeq++
		}
		lr.SetObservedTimestamp(observed)
		e.tel.aepEvent(ev.Type)
	}
	return logs
}

// consume is the one hand-off to the pipeline. It retries refusals the
// pipeline calls temporary (a memory limiter under pressure) so that
// backpressure slows this conversation down rather than dropping its
// events; a permanent refusal is logged and dropped. The hand-off is
// reported once, as the collector's receiver metrics: accepted, or
// refused when the pipeline refused it for good or the wait was cancelled.
func (e *sessionEmitter) consume(ctx context.Context, logs plog.Logs) error {
	n := logs.LogRecordCount() // before the pipeline owns logs
	opCtx := e.tel.obsrecv.StartLogsOp(ctx)
	var refusal error
	defer func() { e.tel.obsrecv.EndLogsOp(opCtx, "aep", n, refusal) }()
	for attempt := 0; ; attempt++ {
		refusal = e.next.ConsumeLogs(opCtx, logs)
		if refusal == nil {
			return nil
		}
		if consumererror.IsPermanent(refusal) {
			e.logger.Error("the pipeline permanently refused AEP log records; they are dropped",
				zap.Int("records", n), zap.Error(refusal))
			return nil
		}
		if attempt == 0 {
			e.logger.Warn("the pipeline refused AEP log records; retrying", zap.Error(refusal))
		}
		if err := e.retry.Sleep(ctx, attempt); err != nil {
			return fmt.Errorf("emit %d AEP log records: %w", n, err)
		}
	}
}
