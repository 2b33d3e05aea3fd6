package aepinboundprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
	"github.com/otelcol-openhands/otelcol-openhands/internal/epoch"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor/internal/vendormap"
)

// maxSessionBytes bounds a session id taken from a record: ids are UUIDs
// in practice, and a longer one would only cost memory in the table.
const maxSessionBytes = 256

type aepInbound struct {
	id      component.ID
	cfg     *Config
	vendors []vendormap.Vendor
	opts    vendormap.Options
	next    consumer.Logs
	tel     *telemetry
	logger  *zap.Logger
	rate    *ratelog.Logger
	now     func() time.Time

	// mu is held from mapping to the next consumer's answer, so that a
	// refused batch can give its positions back (see ConsumeLogs).
	mu       sync.Mutex
	sessions *sessionTable
	store    *positionStore // nil without storage
}

func newProcessor(id component.ID, cfg *Config, set component.TelemetrySettings, next consumer.Logs) (*aepInbound, error) {
	tel, err := newTelemetry(set)
	if err != nil {
		return nil, err
	}
	// secret_env is resolved once, here, so secret values never enter the
	// configuration or the logs.
	redactor, err := capture.NewRedactor(capture.RedactorConfig{
		SecretValues: capture.SecretValuesFromEnv(cfg.SecretEnv, os.LookupEnv),
		SecretKeys:   cfg.SecretNames,
		DisablePII:   !cfg.RedactPII,
	})
	if err != nil {
		return nil, err
	}
	return &aepInbound{
		id:      id,
		cfg:     cfg,
		vendors: cfg.vendors(),
		opts: vendormap.Options{
			Mode:     vendormap.Mode(cfg.Mode),
			Ceiling:  cfg.Capture.Level,
			Redactor: redactor,
		},
		next:     next,
		tel:      tel,
		logger:   set.Logger,
		rate:     ratelog.New(set.Logger, time.Minute),
		now:      time.Now,
		sessions: newSessionTable(cfg.MaxSessions, epoch.Process),
	}, nil
}

// Start opens the storage client when storage is configured.
func (p *aepInbound) Start(ctx context.Context, host component.Host) error {
	if p.cfg.Storage == nil {
		return nil
	}
	store, err := openPositionStore(ctx, host, *p.cfg.Storage, p.id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.store = store
	p.mu.Unlock()
	return nil
}

// Shutdown closes the storage client; every position it holds was
// written before its batch left.
func (p *aepInbound) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store == nil {
		return nil
	}
	err := p.store.close(ctx)
	p.store = nil
	return err
}

func (p *aepInbound) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

// position is a session's state before a batch touched it.
type position struct {
	seq     int64
	started bool
}

// batch is the AEP side of one ConsumeLogs call.
type batch struct {
	out      plog.Logs
	scopes   map[*sessionState]plog.LogRecordSlice
	before   map[*sessionState]position
	observed pcommon.Timestamp
	err      error // storage could not be read: the batch is refused
}

// rollback gives every session the batch touched its position back.
func (b *batch) rollback() {
	for st, pos := range b.before {
		st.seq, st.started = pos.seq, pos.started
	}
}

// ConsumeLogs replaces each configured vendor's record with its AEP event
// (AEP-0005 §3 log records, one ResourceLogs per session), removes every
// record that already was AEP, and passes every other record through
// untouched. When the next consumer refuses the
// batch, each session's seq goes back to where it was: the sender retries
// the export, its records map again to the same positions, times and ids,
// and a consumer that did take part of the first attempt sees legal
// redeliveries (AEP-0001 §7 rule 4), never a gap or a second event at a
// position. A permanent refusal is not retried, so its positions stay
// spent: a gap, which AEP allows, rather than a position reused by other
// events.
func (p *aepInbound) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	b := &batch{
		out:      plog.NewLogs(),
		scopes:   make(map[*sessionState]plog.LogRecordSlice),
		before:   make(map[*sessionState]position),
		observed: pcommon.NewTimestampFromTime(now),
	}
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				return p.mapRecord(ctx, b, rl.Resource(), lr, now)
			})
			return sl.LogRecords().Len() == 0
		})
		return rl.ScopeLogs().Len() == 0
	})
	if b.err == nil && p.store != nil && len(b.before) > 0 {
		b.err = p.store.save(ctx, slices.Collect(maps.Keys(b.before)))
	}
	if b.err != nil {
		// Refused as a whole and retryable: the sender sends it again.
		b.rollback()
		return b.err
	}
	b.out.ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	if ld.ResourceLogs().Len() == 0 {
		return nil
	}
	err := p.next.ConsumeLogs(ctx, ld)
	if err != nil && !consumererror.IsPermanent(err) {
		b.rollback()
	}
	return err
}

// mapRecord appends lr's AEP event to the batch and reports whether lr
// leaves its ResourceLogs: a mapped record is replaced, one the mode emits
// nothing for or that already was AEP is removed, and one without a usable
// session or whose event the projection refuses stays as it came.
func (p *aepInbound) mapRecord(ctx context.Context, b *batch, res pcommon.Resource, lr plog.LogRecord, now time.Time) bool {
	if b.err != nil {
		return false
	}
	if typ, ok := projection.TypeOf(lr); ok {
		p.refuseAEP(ctx, typ)
		return true
	}
	rec := vendormap.FromLogRecord(res, lr)
	v, ok := vendormap.Classify(rec, p.vendors)
	if !ok {
		return false
	}
	session := vendormap.Session(v, rec)
	if session == "" || len(session) > maxSessionBytes {
		p.tel.record(ctx, string(v), outcomeNoSession)
		return false
	}
	st, err := p.session(ctx, sessionKey{v, session}, rec)
	if err != nil {
		b.err = err
		return false
	}
	opts := p.opts
	opts.SessionStarted = st.started
	m, ok := vendormap.Map(v, rec, opts)
	if !ok {
		p.tel.record(ctx, string(v), outcomeSkipped)
		return true
	}
	at, ok := rec.Time()
	if !ok {
		at = now
	}
	ev := &aep.Event{
		AEP: aep.Version, Type: m.Type, Subject: m.Subject, Time: formatTime(at),
		Source: st.source, Agent: string(v), Session: session,
		Seq: aep.Int64(st.seq), Epoch: aep.Int64(st.epoch), Capture: m.Capture, Data: m.Data,
	}
	ev.ID = eventID(at, ev)
	out := plog.NewLogRecord()
	if err := projection.ToLogRecord(ev, out, projection.Options{}); err != nil {
		p.tel.record(ctx, string(v), outcomeRefused)
		p.logger.Error("the projection refused a vendor record's AEP event; the record passes through unmapped and takes no seq",
			zap.String("aep.type", ev.Type), zap.Error(err))
		return false
	}
	if _, touched := b.before[st]; !touched {
		b.before[st] = position{seq: st.seq, started: st.started}
	}
	st.seq++
	if m.Type == "session.started" {
		st.started = true
	}
	out.SetObservedTimestamp(b.observed)
	out.MoveTo(b.records(st).AppendEmpty())
	p.tel.record(ctx, string(v), outcomeMapped)
	return true
}

// refuseAEP counts and logs a record that already was AEP when it arrived:
// this processor's receiver takes anyone's export, so such a record is not
// trusted as AEP, and passed through it would leave under the collector's
// relay identity, a command included. AEP from other emitters belongs to
// the aep receiver, which validates and sequences it.
func (p *aepInbound) refuseAEP(ctx context.Context, typ string) {
	p.tel.aepRefused.Add(ctx, 1)
	p.rate.Warn("aep_refused", "removing a log record that already is AEP: AEP from outside enters by the aep receiver, never by this pipeline",
		zap.String("aep.type", typ))
}

// session is key's state: in the table, else restored from storage, else
// new in the current epoch.
func (p *aepInbound) session(ctx context.Context, key sessionKey, rec vendormap.Record) (*sessionState, error) {
	if st, ok := p.sessions.lookup(key); ok {
		return st, nil
	}
	var restored *storedPosition
	if p.store != nil {
		var err error
		restored, err = p.store.load(ctx, key)
		switch {
		case errors.Is(err, errUnreadablePosition):
			p.logger.Warn("a stored session position is unreadable; the session continues in a new epoch", zap.Error(err))
		case err != nil:
			return nil, err
		}
	}
	st, evicted := p.sessions.add(key, aep.SessionSource(p.sourceHost(rec), string(key.vendor), key.session), restored)
	if evicted {
		p.tel.evicted.Add(ctx, 1)
	}
	return st, nil
}

// records is the batch's log record slice for st's session, created with
// its resource (service.name = agent) on first use.
func (b *batch) records(st *sessionState) plog.LogRecordSlice {
	if lrs, ok := b.scopes[st]; ok {
		return lrs
	}
	rl := b.out.ResourceLogs().AppendEmpty()
	projection.SetResource(rl.Resource(), string(st.key.vendor))
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(scopeName)
	b.scopes[st] = sl.LogRecords()
	return sl.LogRecords()
}

// sourceHost is the source's authority: the agent's own host.name where
// the ceiling discloses it (redacted and above), else source_host.
func (p *aepInbound) sourceHost(rec vendormap.Record) string {
	if p.opts.Ceiling.Allows(aep.CaptureRedacted) {
		if h := vendormap.HostName(rec); configcheck.IsHostName(h) {
			return h
		}
	}
	return p.cfg.SourceHost
}

// eventID derives the id from the event's position and content, so a
// retried export (same record, same position) yields the same id, while a
// different event at a reused position never does.
func eventID(at time.Time, ev *aep.Event) string {
	digest, err := aep.Digest(ev.Data)
	if err != nil {
		digest = "undigestable"
	}
	return aep.DeterministicID(at, ev.Source, strconv.FormatInt(*ev.Epoch, 10), strconv.FormatInt(*ev.Seq, 10),
		ev.Type, ev.Subject, ev.Time, digest)
}

// formatTime renders t in UTC with milliseconds, or microseconds when it
// has them: the renderings the projection carries without an extra
// attribute (its time_unix_nano keeps microseconds).
func formatTime(t time.Time) string {
	t = t.UTC().Truncate(time.Microsecond)
	if t.Nanosecond()%int(time.Millisecond) == 0 {
		return t.Format("2006-01-02T15:04:05.000Z")
	}
	return t.Format("2006-01-02T15:04:05.000000Z")
}
