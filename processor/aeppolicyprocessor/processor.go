package aeppolicyprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/epoch"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor/internal/policy"
)

type aepPolicy struct {
	id     component.ID
	cfg    *Config
	next   consumer.Logs
	tel    *telemetry
	logger *zap.Logger
	rlog   *ratelog.Logger
	now    func() time.Time
	// ownSources prefixes the sources of the events this processor emits.
	ownSources string

	// mu is held from judging a batch to the next consumer's answer, so
	// that a refused batch rolls the engine back before anything else is
	// judged (see judged).
	mu     sync.Mutex
	engine *policy.Engine
	store  *stateStore // nil without storage
	// gate executes the pauses of action: pause; nil when no policy pauses.
	gate openhandscontrol.Originator

	stop chan struct{}
	done chan struct{}
}

func newProcessor(id component.ID, cfg *Config, set component.TelemetrySettings, next consumer.Logs) (*aepPolicy, error) {
	tel, err := newTelemetry(set)
	if err != nil {
		return nil, err
	}
	return &aepPolicy{
		id: id, cfg: cfg, next: next, tel: tel, logger: set.Logger, rlog: ratelog.New(set.Logger, time.Minute), now: time.Now,
		ownSources: "aep://" + cfg.SourceHost + "/",
		engine:     policy.New(cfg.policies(), epoch.Process.Next, cfg.MaxSessions),
	}, nil
}

// Start restores the stored state, then starts the clock of the
// time-driven rules.
func (p *aepPolicy) Start(ctx context.Context, host component.Host) error {
	if p.cfg.pauses() {
		gate, ok := host.GetExtensions()[*p.cfg.Control].(openhandscontrol.Originator)
		if !ok {
			return fmt.Errorf("control: %q is not a configured openhandscontrol extension", *p.cfg.Control)
		}
		p.gate = gate
	}
	if p.cfg.Storage != nil {
		store, err := openStateStore(ctx, host, *p.cfg.Storage, p.id)
		if err != nil {
			return err
		}
		sessions, agents, skipped, err := store.load(ctx)
		if err != nil {
			_ = store.close(ctx)
			return err
		}
		for _, err := range skipped {
			p.tel.storage.Add(ctx, 1)
			p.logger.Warn("a stored policy state is unreadable; it starts afresh", zap.Error(err))
		}
		p.mu.Lock()
		p.store = store
		p.engine.Restore(sessions, agents)
		p.mu.Unlock()
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.tick()
	return nil
}

// Shutdown stops the clock and closes the storage client; every state it
// holds was written before its batch left.
func (p *aepPolicy) Shutdown(ctx context.Context) error {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store == nil {
		return nil
	}
	err := p.store.close(ctx)
	p.store = nil
	return err
}

func (p *aepPolicy) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

// tick judges the time-driven rules every check_interval.
func (p *aepPolicy) tick() {
	defer close(p.done)
	t := time.NewTicker(p.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.resendUnsent(context.Background())
			p.judgeTime(context.Background())
		}
	}
}

// judgeTime judges the time-driven rules now. A refused breach is judged
// again at the next check: it keeps its time and position, so it is the
// same event.
func (p *aepPolicy) judgeTime(ctx context.Context) {
	p.mu.Lock()
	p.engine.Begin()
	breaches := p.engine.Tick(p.now())
	err := p.judged(ctx, plog.NewLogs(), breaches)
	p.mu.Unlock()
	if err != nil {
		p.rlog.Warn("tick", "the time-driven policies' breaches were refused; they are judged again at the next check", zap.Error(err))
		return
	}
	p.act(ctx, breaches)
}

// ConsumeLogs judges every AEP record of the batch and passes the batch
// on unchanged, with a guardrail event appended for each breach it
// crossed. When the next consumer refuses the batch, the engine goes back
// to where it was: the sender's retry crosses the same breaches at the
// same positions, with the same ids, and a consumer that took part of the
// first attempt sees legal redeliveries.
func (p *aepPolicy) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	breaches, err := p.judgeBatch(ctx, ld)
	if err != nil {
		return err
	}
	p.act(ctx, breaches)
	return nil
}

// judgeBatch judges ld and hands it on with its breaches' events.
func (p *aepPolicy) judgeBatch(ctx context.Context, ld plog.Logs) ([]policy.Breach, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.engine.Begin()
	var breaches []policy.Breach
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				ev, err := projection.FromLogRecord(lr, rl.Resource())
				switch {
				case errors.Is(err, projection.ErrNotAEP):
					continue
				case err != nil:
					p.tel.unreadable.Add(ctx, 1)
					p.rlog.Warn("unreadable AEP record", "an AEP record could not be read back; it passes through unjudged", zap.Error(err))
					continue
				}
				if strings.HasPrefix(ev.Source, p.ownSources) {
					continue // a breach this processor recorded, retried
				}
				breaches = append(breaches, p.engine.Observe(ev, now)...)
			}
		}
	}
	return breaches, p.judged(ctx, ld, breaches)
}

// act pauses the conversation of each hard breach whose policy set says
// action: pause, once the breach's event has been taken, outside the
// processor's lock (the gate acks through the receiver's emission path,
// which may lead back here). The command is the collector's own: its id
// is the guardrail event's, so its ack and outcome, cause-linked to the
// command, lead operators to the breach; the gate deduplicates it, guards
// it and addresses only a conversation this collector observes alone.
func (p *aepPolicy) act(ctx context.Context, breaches []policy.Breach) {
	if p.gate == nil {
		return
	}
	for _, b := range breaches {
		if b.Level != policy.Hard || p.cfg.rulesOf(b.Agent).Action != actionPause {
			continue
		}
		id := p.guardrailEvent(b).ID
		cmd := &aep.Event{
			AEP: aep.Version, ID: id, Type: "control.pause", Time: formatTime(b.At),
			Source: p.ownSources + "agent/aeppolicy", Agent: "aeppolicy", Session: b.Session, Cause: id,
		}
		outcome := actionOriginated
		if err := p.gate.Originate(ctx, cmd); errors.Is(err, openhandscontrol.ErrGateClosed) {
			outcome = actionGateClosed
		} else if err != nil {
			outcome = actionFailed
			p.rlog.Warn("originate", "could not originate a policy's pause", zap.String("session", b.Session), zap.Error(err))
		}
		p.tel.action(ctx, b, actionPause, outcome)
	}
}

// judged appends the breaches' events to ld, stores what the change set
// changed, and hands ld on; on a refusal it rolls the change set back.
// Breaches are counted once their events are taken.
func (p *aepPolicy) judged(ctx context.Context, ld plog.Logs, breaches []policy.Breach) error {
	// A refused batch leaves as it came: the sender may retry with it.
	given := ld.ResourceLogs().Len()
	refused := func() {
		p.rollback(ctx)
		i := 0
		ld.ResourceLogs().RemoveIf(func(plog.ResourceLogs) bool { i++; return i > given })
	}
	if err := p.appendBreaches(ld, breaches); err != nil {
		refused()
		return consumererror.NewPermanent(err)
	}
	if p.store != nil {
		if err := p.store.save(ctx, p.engine.Pending(), p.engine); err != nil {
			p.tel.storage.Add(ctx, 1)
			refused()
			return err
		}
	}
	if ld.LogRecordCount() > 0 {
		if err := p.next.ConsumeLogs(ctx, ld); err != nil {
			if consumererror.IsPermanent(err) {
				// Not retried: what it spent and fired stays spent.
				p.engine.Commit()
			} else {
				refused()
			}
			return err
		}
	}
	p.engine.Commit()
	p.engine.Delivered(breaches)
	for _, b := range breaches {
		p.tel.breach(ctx, b)
	}
	return nil
}

// resendUnsent hands on again the breaches a previous process stored and
// was not seen to deliver: the same events at the same positions, which
// consumers dedupe if they had them. They are not counted again, and a
// pause they asked for is not repeated (at most once per breach).
func (p *aepPolicy) resendUnsent(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	unsent := p.engine.Unsent()
	if len(unsent) == 0 {
		return
	}
	ld := plog.NewLogs()
	err := p.appendBreaches(ld, unsent)
	if err == nil {
		err = p.next.ConsumeLogs(ctx, ld)
	}
	if err != nil {
		p.rlog.Warn("resend", "could not send the stored breaches again; they are tried at the next check", zap.Error(err))
		return
	}
	p.engine.Delivered(unsent)
}

// rollback undoes the change set, in storage too.
func (p *aepPolicy) rollback(ctx context.Context) {
	restored := p.engine.Rollback()
	if p.store == nil {
		return
	}
	if err := p.store.save(ctx, restored, p.engine); err != nil {
		// Storage keeps the refused batch's totals: after a restart its
		// retry is recognised as seen, and counted once.
		p.tel.storage.Add(ctx, 1)
		p.rlog.Warn("store back", "could not store the policy state back after a refused batch", zap.Error(err))
	}
}

// appendBreaches adds each breach's guardrail event to ld, one resource
// per agent (service.name, as the projection sets it).
func (p *aepPolicy) appendBreaches(ld plog.Logs, breaches []policy.Breach) error {
	scopes := make(map[string]plog.LogRecordSlice)
	observed := pcommon.NewTimestampFromTime(p.now())
	for _, b := range breaches {
		ev := p.guardrailEvent(b)
		lrs, ok := scopes[b.Agent]
		if !ok {
			rl := ld.ResourceLogs().AppendEmpty()
			projection.SetResource(rl.Resource(), b.Agent)
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(scopeName)
			lrs = sl.LogRecords()
			scopes[b.Agent] = lrs
		}
		lr := lrs.AppendEmpty()
		if err := projection.ToLogRecord(ev, lr, projection.Options{}); err != nil {
			return err
		}
		lr.SetObservedTimestamp(observed)
	}
	return nil
}

// guardrailEvent is a breach as AEP records it: an
// assessment.guardrail.recorded in the engine's own stream of the
// session, cause-linked to the event that crossed the threshold, with the
// policy as detector and category and the numbers as scores. The verdict
// is flagged: the processor reports; it does not block.
func (p *aepPolicy) guardrailEvent(b policy.Breach) *aep.Event {
	family, _, _ := strings.Cut(b.Policy, ".")
	severity := aep.SeverityWarning
	if b.Level == policy.Hard {
		severity = aep.SeverityError
	}
	ev := &aep.Event{
		AEP: aep.Version, Type: "assessment.guardrail.recorded", Time: formatTime(b.At),
		Source: aep.SessionSource(p.cfg.SourceHost, b.Agent, b.Session), Agent: b.Agent, Session: b.Session,
		Seq: aep.Int64(b.Seq), Epoch: aep.Int64(b.Epoch), Cause: b.Cause,
		Severity: severity, Capture: aep.CaptureMetadata,
		Data: map[string]any{"guardrail": map[string]any{
			"verdict":  "flagged",
			"detector": map[string]any{"name": "aeppolicy." + family, "version": strconv.Itoa(policy.StateVersion)},
			"categories": []any{
				map[string]any{"name": b.Policy, "score": b.Value},
				map[string]any{"name": "threshold." + string(b.Level), "score": b.Threshold},
			},
		}},
	}
	ev.ID = aep.DeterministicID(b.At, ev.Source, strconv.FormatInt(b.Epoch, 10), strconv.FormatInt(b.Seq, 10),
		b.Policy, string(b.Level), b.Cause)
	return ev
}

// formatTime renders t in UTC with milliseconds, as the projection carries
// it without an extra attribute.
func formatTime(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
}
