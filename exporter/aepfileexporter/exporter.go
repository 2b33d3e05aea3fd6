package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/logevent"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
)

// logEvery spaces repeats of one warning or error.
const logEvery = time.Minute

// housekeepingPeriod and minHousekeepingPeriod bound the wait between two
// rounds of interval syncs and closes of ended sessions: the round follows
// ended_grace and fsync_interval within these bounds.
const (
	housekeepingPeriod    = time.Second
	minHousekeepingPeriod = 10 * time.Millisecond
)

// fileExporter is the push function exporterhelper wraps, plus the
// housekeeping that runs beside it.
type fileExporter struct {
	cfg       *Config
	rate      *ratelog.Logger
	tel       *telemetry
	converter logevent.Converter
	writer    *logWriter
	now       func() time.Time

	statusMu   sync.Mutex
	host       component.Host
	lastStatus componentstatus.Status

	stop chan struct{}
	done sync.WaitGroup
}

func newFileExporter(cfg *Config, set exporter.Settings) (*fileExporter, error) {
	fileMode, err := parseMode(cfg.FileMode)
	if err != nil {
		return nil, fmt.Errorf("file_mode: %w", err)
	}
	dirMode, err := parseMode(cfg.DirMode)
	if err != nil {
		return nil, fmt.Errorf("dir_mode: %w", err)
	}
	directory, err := filepath.Abs(cfg.Directory)
	if err != nil {
		return nil, fmt.Errorf("directory: %w", err)
	}
	w := newLogWriter(writerConfig{
		directory: directory, fileMode: fileMode, dirMode: dirMode,
		maxOpen: cfg.MaxOpenFiles, dedupWindow: cfg.DedupWindow,
		sync:        cfg.Fsync != FsyncNone,
		rotateBytes: cfg.RotateBytes, compressEnded: cfg.CompressEnded,
	}, set.Logger)
	tel, err := newTelemetry(set.TelemetrySettings, w.openLogs)
	if err != nil {
		return nil, fmt.Errorf("create the exporter's metrics: %w", err)
	}
	return &fileExporter{
		cfg:       cfg,
		rate:      ratelog.New(set.Logger, logEvery),
		tel:       tel,
		converter: logevent.Converter{Ceiling: cfg.MaxCapture},
		writer:    w,
		now:       time.Now,
		stop:      make(chan struct{}),
	}, nil
}

// start makes the root directory, so that a directory that cannot be
// made is reported at once; it does not fail the collector's start, since
// writes retry and a mount may come later.
func (e *fileExporter) start(ctx context.Context, host component.Host) error {
	e.statusMu.Lock()
	e.host = host
	e.statusMu.Unlock()
	e.failed(ctx, "create", e.writer.makeRoot())
	e.done.Add(1)
	go e.housekeep()
	return nil
}

// shutdown stops the housekeeping, then syncs (unless fsync is none) and
// closes every open log.
func (e *fileExporter) shutdown(context.Context) error {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	e.done.Wait()
	var err error
	if e.cfg.Fsync != FsyncNone {
		err = e.writer.sync()
	}
	return errors.Join(err, e.writer.closeAll())
}

// housekeep syncs on the interval policy, closes (and compresses) ended
// sessions' logs once their grace is over, and deletes logs past max_age.
func (e *fileExporter) housekeep() {
	defer e.done.Done()
	ctx := context.Background()
	period := min(housekeepingPeriod, e.cfg.EndedGrace)
	if e.cfg.Fsync == FsyncInterval {
		period = min(period, e.cfg.FsyncInterval)
	}
	period = max(period, minHousekeepingPeriod)
	// A sweep reads every directory: every minute, or every max_age when
	// that is shorter.
	sweepEvery := min(e.cfg.MaxAge, time.Minute)
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	lastSync, lastSweep := e.now(), e.now()
	for {
		select {
		case <-e.stop:
			return
		case <-ticker.C:
		}
		now := e.now()
		if e.cfg.Fsync == FsyncInterval && now.Sub(lastSync) >= e.cfg.FsyncInterval {
			lastSync = now
			e.failed(ctx, "fsync", e.writer.sync())
		}
		e.failed(ctx, "close", e.writer.closeEnded(now, e.cfg.EndedGrace))
		if e.cfg.MaxAge > 0 && now.Sub(lastSweep) >= sweepEvery {
			lastSweep = now
			removed, err := e.writer.removeUntouched(now, e.cfg.MaxAge)
			e.tel.filesDeleted.Add(ctx, int64(removed))
			e.failed(ctx, "delete", err)
		}
		e.countSegments(ctx)
	}
}

// countSegments passes the writer's rotations and compressions on to the
// metrics.
func (e *fileExporter) countSegments(ctx context.Context) {
	rotated, compressed := e.writer.takeCounts()
	e.tel.filesRotated.Add(ctx, int64(rotated))
	e.tel.filesCompressed.Add(ctx, int64(compressed))
}

// pushLogs appends one push's AEP events to their session logs, in record
// order. Records that are not AEP events are skipped and invalid events
// rejected, each counted and logged; neither fails the push. A session
// whose file cannot be written fails the push for its events alone: the
// retry carries them, in order, and the other sessions' events are
// written now.
func (e *fileExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	now := e.now()
	var skipped []string
	failed := make(map[fileKey]error)
	var retry []logevent.RecordRef
	for i, rl := range ld.ResourceLogs().All() {
		for j, sl := range rl.ScopeLogs().All() {
			for k, lr := range sl.LogRecords().All() {
				record := logevent.RecordRef{Resource: i, Scope: j, Record: k}
				ev, raw, rejected := e.converter.Convert(lr, rl.Resource())
				switch {
				case rejected != nil && errors.Is(rejected.Err, projection.ErrNotAEP):
					skipped = append(skipped, lr.EventName())
					continue
				case rejected != nil:
					e.reject(ctx, rejected)
					continue
				}
				key := keyOf(ev)
				if _, ok := failed[key]; ok {
					retry = append(retry, record)
					continue
				}
				written, err := e.writer.write(ev, raw, now)
				switch {
				case err != nil:
					failed[key] = err
					retry = append(retry, record)
				case written:
					e.tel.eventsWritten.Add(ctx, 1)
				default:
					e.tel.eventsDuplicate.Add(ctx, 1)
				}
			}
		}
	}
	if n := len(skipped); n > 0 {
		e.tel.eventsSkipped.Add(ctx, int64(n))
		e.rate.Warn("not_aep", "skipping log records that are not AEP events (no dev.aep. event_name)",
			zap.Int("records", n), zap.String("first_event_name", skipped[0]))
	}
	var errs []error
	for _, err := range failed {
		errs = append(errs, err)
	}
	if e.cfg.Fsync == FsyncEveryBatch {
		// Retrying the whole push is safe: the lines already written are
		// deduplicated.
		if err := e.writer.sync(); err != nil {
			e.failed(ctx, "fsync", err)
			return fmt.Errorf("aepfile: %w", errors.Join(append(errs, err)...))
		}
	}
	e.countSegments(ctx)
	if len(errs) == 0 {
		e.report(componentstatus.NewEvent(componentstatus.StatusOK))
		return nil
	}
	err := fmt.Errorf("aepfile: %w", errors.Join(errs...))
	e.failed(ctx, "write", err)
	return consumererror.NewLogs(err, logevent.RecordsOf(ld, retry))
}

// failed logs a file error, counts it and reports the component as
// recoverable; the next push that succeeds reports it OK again.
func (e *fileExporter) failed(ctx context.Context, op string, err error) {
	if err == nil {
		return
	}
	kind := errorKind(err)
	e.tel.writeErrors.Add(ctx, 1)
	e.rate.Error(op+"_"+kind, "cannot "+op+" an AEP session log ("+kind+")",
		zap.String("directory", e.writer.cfg.directory), zap.Error(err))
	e.report(componentstatus.NewRecoverableErrorEvent(err))
}

// errorKind names the file errors an operator fixes by hand.
func errorKind(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "disk_full"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return "permission_denied"
	default:
		return "io_error"
	}
}

// report passes a status change on to the host.
func (e *fileExporter) report(ev *componentstatus.Event) {
	e.statusMu.Lock()
	defer e.statusMu.Unlock()
	if e.host == nil || ev.Status() == e.lastStatus {
		return
	}
	e.lastStatus = ev.Status()
	componentstatus.ReportStatus(e.host, ev)
}

// reject counts and logs one event that will never be written.
func (e *fileExporter) reject(ctx context.Context, r *logevent.Rejection) {
	e.tel.rejected(ctx, r.Reason)
	var id, typ string
	if r.Event != nil {
		id, typ = r.Event.ID, r.Event.Type
	}
	e.rate.Error("rejected_"+r.Reason+"_"+typ, "dropping an AEP event that can never be written",
		zap.String("reason", r.Reason), zap.String("id", id), zap.String("type", typ), zap.Error(r.Err))
}
