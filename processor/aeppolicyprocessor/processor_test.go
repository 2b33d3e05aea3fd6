package aeppolicyprocessor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

var (
	t0            = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	fileStorageID = component.MustNewID("file_storage")
)

const ownerSource = "aep://agent-server:8000/agent/openhands/session/conv-1"

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

func newTestProcessor(t *testing.T, next *consumertest.LogsSink, c *clock, configure func(*Config)) *aepPolicy {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Default.Session.CostUSD = LimitConfig{Soft: 1, Hard: 2}
	if configure != nil {
		configure(cfg)
	}
	require.NoError(t, cfg.Validate())
	p, err := newProcessor(component.NewID(componentType), cfg, componenttest.NewNopTelemetrySettings(), next)
	require.NoError(t, err)
	p.now = c.now
	return p
}

// owner is the session's owner: it sequences its own events.
type owner struct {
	seq, runs int64
}

func (o *owner) event(typ string, at time.Time, data map[string]any) *aep.Event {
	if typ == "run.started" || o.runs == 0 {
		o.runs++
	}
	ev := &aep.Event{
		AEP: aep.Version, ID: fmt.Sprintf("owner-%d", o.seq), Type: typ, Time: at.Format("2006-01-02T15:04:05.000Z"),
		Source: ownerSource, Agent: "openhands", Session: "conv-1", Run: fmt.Sprintf("run-%d", o.runs),
		Seq: aep.Int64(o.seq), Epoch: aep.Int64(1), Data: data,
	}
	o.seq++
	return ev
}

func logsOf(t testing.TB, events ...*aep.Event) plog.Logs {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	projection.SetResource(rl.Resource(), "openhands")
	sl := rl.ScopeLogs().AppendEmpty()
	for _, ev := range events {
		require.NoError(t, projection.ToLogRecord(ev, sl.LogRecords().AppendEmpty(), projection.Options{}))
	}
	// A record that is no AEP event passes through untouched.
	sl.LogRecords().AppendEmpty().Body().SetStr("not an AEP event")
	return ld
}

func costData(total float64) map[string]any {
	return map[string]any{"cost": map[string]any{"currency": "USD", "total": json.Number(fmt.Sprint(total))}}
}

// eventsOf reads every AEP event of what the sink took, in order.
func eventsOf(t *testing.T, all []plog.Logs) (owned, guardrails []*aep.Event) {
	t.Helper()
	for _, ld := range all {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					ev, err := projection.FromLogRecord(lr, rl.Resource())
					if errors.Is(err, projection.ErrNotAEP) {
						continue
					}
					require.NoError(t, err)
					if ev.Type == "assessment.guardrail.recorded" {
						guardrails = append(guardrails, ev)
					} else {
						owned = append(owned, ev)
					}
				}
			}
		}
	}
	return owned, guardrails
}

// TestBreachRecordedOnce: the batch passes through whole; the event that
// crosses a threshold gets one schema-valid guardrail event in the
// processor's own stream of the session, cause-linked to it, and the
// stream stays legal; later events over the same threshold add none.
func TestBreachRecordedOnce(t *testing.T) {
	sink := new(consumertest.LogsSink)
	c := &clock{at: t0}
	p := newTestProcessor(t, sink, c, nil)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()

	var o owner
	started := o.event("run.started", t0, nil)
	crossing := o.event("run.finished", t0, costData(1.5))
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, started, crossing)))
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, o.event("run.started", t0, nil), o.event("run.finished", t0, costData(0.1)))))

	owned, guardrails := eventsOf(t, sink.AllLogs())
	assert.Len(t, owned, 4, "every event passes through")
	assert.Equal(t, 6, sink.LogRecordCount()-1, "and the foreign records (one per batch), and one guardrail")
	require.Len(t, guardrails, 1)
	g := guardrails[0]
	require.NoError(t, schema.Validate(g))
	assert.Equal(t, crossing.ID, g.Cause)
	assert.Equal(t, "aep://aeppolicy/agent/openhands/session/conv-1", g.Source, "its own stream, not the owner's")
	assert.Equal(t, "conv-1", g.Session)
	assert.Equal(t, aep.SeverityWarning, g.Severity)
	assert.Equal(t, map[string]any{
		"verdict":  "flagged",
		"detector": map[string]any{"name": "aeppolicy.budget", "version": "1"},
		"categories": []any{
			map[string]any{"name": "budget.session.cost", "score": json.Number("1.5")},
			map[string]any{"name": "threshold.soft", "score": json.Number("1")},
		},
	}, g.Data["guardrail"])

	var checker stream.Checker
	for _, ev := range append(owned, guardrails...) {
		require.NoError(t, checker.Add(ev))
	}
}

// refuseOnce refuses its first batch, retryably, then takes every one.
type refuseOnce struct {
	consumertest.LogsSink
	refused bool
}

func (r *refuseOnce) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if !r.refused {
		r.refused = true
		return errors.New("queue is full")
	}
	return r.LogsSink.ConsumeLogs(ctx, ld)
}

// TestRefusedBatchRollsBack: when the next consumer refuses a batch, the
// batch leaves as it came, and its retry crosses the same breach with the
// same id and position.
func TestRefusedBatchRollsBack(t *testing.T) {
	next := &refuseOnce{}
	c := &clock{at: t0}
	cfg := createDefaultConfig().(*Config)
	cfg.Default.Session.CostUSD = LimitConfig{Hard: 1}
	p, err := newProcessor(component.NewID(componentType), cfg, componenttest.NewNopTelemetrySettings(), next)
	require.NoError(t, err)
	p.now = c.now

	var o owner
	ld := logsOf(t, o.event("run.finished", t0, costData(1.5)))
	before := ld.LogRecordCount()
	require.Error(t, p.ConsumeLogs(context.Background(), ld))
	assert.Equal(t, before, ld.LogRecordCount(), "the refused batch is as it came")
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	_, guardrails := eventsOf(t, next.AllLogs())
	require.Len(t, guardrails, 1, "the retry is judged again, once")
	assert.Equal(t, int64(0), *guardrails[0].Seq)
}

// TestOncePerBreachAcrossRestart: with storage, a restarted processor
// keeps the session's totals and fired breaches: the owner's redelivery
// of the crossing event fires nothing, the next event continues the
// totals, and the processor's positions continue in the same epoch.
func TestOncePerBreachAcrossRestart(t *testing.T) {
	host := hosttest.Extensions{fileStorageID: hosttest.FileStorage(t, t.TempDir())}
	c := &clock{at: t0}
	var o owner
	first := o.event("run.finished", t0, costData(1.5))
	second := o.event("run.finished", t0, costData(0.1))
	third := o.event("run.finished", t0, costData(0.5))
	var checker stream.Checker
	var guardrails []*aep.Event
	for i, batch := range [][]*aep.Event{{first}, {first, second}, {third}} {
		sink := new(consumertest.LogsSink)
		p := newTestProcessor(t, sink, c, func(cfg *Config) { cfg.Storage = &fileStorageID })
		require.NoError(t, p.Start(context.Background(), host))
		require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, batch...)))
		require.NoError(t, p.Shutdown(context.Background()), "restart %d", i)
		_, g := eventsOf(t, sink.AllLogs())
		for _, ev := range g {
			require.NoError(t, checker.Add(ev))
		}
		guardrails = append(guardrails, g...)
	}
	require.Len(t, guardrails, 2, "soft once, then hard once, across two restarts")
	assert.NotEqual(t, guardrails[0].ID, guardrails[1].ID)
	assert.Equal(t, first.ID, guardrails[0].Cause)
	assert.Equal(t, third.ID, guardrails[1].Cause, "1.5 + 0.1 + 0.5 crosses 2: the totals survived")
	assert.Equal(t, *guardrails[0].Epoch, *guardrails[1].Epoch, "the positions continue in the stored epoch")
	assert.Equal(t, int64(1), *guardrails[1].Seq)
}

// TestStuckRunOnTick: the clock of the time-driven rules finds a running
// run gone quiet and records it once, cause-linked to its last event.
func TestStuckRunOnTick(t *testing.T) {
	sink := new(consumertest.LogsSink)
	c := &clock{at: t0}
	p := newTestProcessor(t, sink, c, func(cfg *Config) {
		cfg.CheckInterval = 5 * time.Millisecond
		cfg.Default.Stuck.After = time.Minute
	})
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	var o owner
	last := o.event("run.started", t0, nil)
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, last)))
	c.add(2 * time.Minute)
	require.Eventually(t, func() bool { return sink.LogRecordCount() > 2 }, 10*time.Second, 5*time.Millisecond)
	_, guardrails := eventsOf(t, sink.AllLogs())
	require.Len(t, guardrails, 1)
	assert.Equal(t, last.ID, guardrails[0].Cause)
	assert.Equal(t, "2026-07-01T10:01:00.000Z", guardrails[0].Time, "the moment the silence reached its limit")
	require.NoError(t, schema.Validate(guardrails[0]))
}

// TestOwnEventsNotJudged: the processor's own events coming back (a
// relay feeding the collector, a retried batch) are no sign of life: a
// stuck run stays flagged once, not once per check.
func TestOwnEventsNotJudged(t *testing.T) {
	sink := new(consumertest.LogsSink)
	c := &clock{at: t0}
	p := newTestProcessor(t, sink, c, func(cfg *Config) { cfg.Default.Stuck.After = time.Minute })
	var o owner
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, o.event("run.started", t0, nil))))
	for range 3 {
		c.add(2 * time.Minute)
		p.judgeTime(context.Background())
		for _, ld := range sink.AllLogs() {
			back := plog.NewLogs()
			ld.CopyTo(back)
			require.NoError(t, p.ConsumeLogs(context.Background(), back))
		}
	}
	var ids []string
	_, guardrails := eventsOf(t, sink.AllLogs())
	for _, g := range guardrails {
		ids = append(ids, g.ID)
	}
	assert.Len(t, slices.Compact(ids), 1, "one breach, however often it comes back")
}

// TestModelCallUsagePriced: a model call's tokens without a cost are
// priced with the configured prices, as the aep connector prices them.
func TestModelCallUsagePriced(t *testing.T) {
	sink := new(consumertest.LogsSink)
	c := &clock{at: t0}
	p := newTestProcessor(t, sink, c, func(cfg *Config) {
		cfg.Prices = usage.Prices{"gpt-5-codex": {Input: 1e6}}
	})
	var o owner
	call := o.event("x.codex.otel.sse_event", t0, map[string]any{
		usage.AttrOperationName: "chat", usage.AttrRequestModel: "gpt-5-codex",
		usage.AttrInputTokens: json.Number("2"), usage.AttrOutputTokens: json.Number("5"),
	})
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, call)))
	_, guardrails := eventsOf(t, sink.AllLogs())
	require.Len(t, guardrails, 1, "two tokens at a dollar each cross hard")
	assert.Equal(t, aep.SeverityError, guardrails[0].Severity)
}

// TestAStoredBreachIsSentAfterACrash: a breach stored with its batch but
// never delivered (the process died in between) is sent by the next
// process, the same event, and not fired anew.
func TestAStoredBreachIsSentAfterACrash(t *testing.T) {
	host := hosttest.Extensions{fileStorageID: hosttest.FileStorage(t, t.TempDir())}
	c := &clock{at: t0}
	var o owner
	crossing := o.event("run.finished", t0, costData(1.5))

	dead := new(consumertest.LogsSink)
	p := newTestProcessor(t, dead, c, func(cfg *Config) { cfg.Storage = &fileStorageID })
	require.NoError(t, p.Start(context.Background(), host))
	p.mu.Lock()
	p.engine.Begin()
	breaches := p.engine.Observe(crossing, t0)
	require.NoError(t, p.store.save(context.Background(), p.engine.Pending(), p.engine), "written ahead")
	p.engine.Commit()
	p.mu.Unlock()
	require.Len(t, breaches, 1)
	require.NoError(t, p.Shutdown(context.Background()), "and then nothing left: the crash")
	assert.Zero(t, dead.LogRecordCount())

	sink := new(consumertest.LogsSink)
	p = newTestProcessor(t, sink, c, func(cfg *Config) {
		cfg.Storage = &fileStorageID
		cfg.CheckInterval = 5 * time.Millisecond
	})
	require.NoError(t, p.Start(context.Background(), host))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool { return sink.LogRecordCount() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, crossing)), "the owner's redelivery")
	_, guardrails := eventsOf(t, sink.AllLogs())
	require.Len(t, guardrails, 1, "sent again once, not fired anew")
	assert.Equal(t, p.guardrailEvent(breaches[0]).ID, guardrails[0].ID)
}
