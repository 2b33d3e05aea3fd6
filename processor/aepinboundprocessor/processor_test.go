package aepinboundprocessor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/epoch"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"
)

var t0 = time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

// export builds one OTLP export: resources, each with its records' event
// names and attributes.
type export struct{ ld plog.Logs }

func newExport() *export { return &export{ld: plog.NewLogs()} }

func (e *export) resource(attrs map[string]any) plog.LogRecordSlice {
	rl := e.ld.ResourceLogs().AppendEmpty()
	if err := rl.Resource().Attributes().FromRaw(attrs); err != nil {
		panic(err)
	}
	return rl.ScopeLogs().AppendEmpty().LogRecords()
}

func addRecord(lrs plog.LogRecordSlice, at time.Time, attrs map[string]any) {
	lr := lrs.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	if err := lr.Attributes().FromRaw(attrs); err != nil {
		panic(err)
	}
}

func codexResource() map[string]any {
	return map[string]any{"service.name": "codex_cli_rs", "service.version": "0.64.0", "host.name": "ws-7"}
}

func codexAttrs(conversation, name string, extra map[string]any) map[string]any {
	attrs := map[string]any{"event.name": name, "conversation.id": conversation, "originator": "codex_cli_rs", "app.version": "0.64.0"}
	for k, v := range extra {
		attrs[k] = v
	}
	return attrs
}

func newTestProcessor(t *testing.T, next consumer.Logs, edit func(*Config)) *aepInbound {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	p, err := newProcessor(component.MustNewID("aepinbound"), cfg, componenttest.NewNopTelemetrySettings(), next)
	require.NoError(t, err)
	return p
}

// aepEvents decodes every AEP record of ld, checking each is schema-valid.
func aepEvents(t *testing.T, ld plog.Logs) []*aep.Event {
	t.Helper()
	var out []*aep.Event
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				ev, err := projection.FromLogRecord(lr, rl.Resource())
				if err != nil {
					continue
				}
				require.NoError(t, schema.Validate(ev), "%s", ev.Type)
				out = append(out, ev)
			}
		}
	}
	return out
}

func checkStream(t *testing.T, c *stream.Checker, events []*aep.Event) {
	t.Helper()
	for _, ev := range events {
		require.NoError(t, c.Add(ev))
	}
}

func TestPassthroughAndReplacement(t *testing.T) {
	sink := new(consumertest.LogsSink)
	p := newTestProcessor(t, sink, nil)
	e := newExport()
	app := e.resource(map[string]any{"service.name": "checkout"})
	addRecord(app, t0, map[string]any{"http.route": "/pay"})
	codex := e.resource(codexResource())
	addRecord(codex, t0, codexAttrs("conv-a", "codex.conversation_starts", map[string]any{"model": "gpt-5-codex"}))
	addRecord(codex, t0.Add(time.Second), map[string]any{"message": "a tracing line without event.name"})
	addRecord(codex, t0.Add(2*time.Second), codexAttrs("conv-b", "codex.api_request", map[string]any{"duration_ms": "90"}))
	want := plog.NewLogs()
	e.ld.ResourceLogs().At(0).CopyTo(want.ResourceLogs().AppendEmpty())

	require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
	got := sink.AllLogs()[0]
	// The application's resource is untouched; the codex resource keeps
	// only the record that is not the vendor's (it has no event name and
	// codex_cli_rs is not a service name the profile claims).
	require.Equal(t, 4, got.ResourceLogs().Len())
	assert.Equal(t, want.ResourceLogs().At(0).Resource().Attributes().AsRaw(), got.ResourceLogs().At(0).Resource().Attributes().AsRaw())
	assert.Equal(t, want.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().AsRaw(),
		got.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().AsRaw())
	kept := got.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords()
	require.Equal(t, 1, kept.Len())
	assert.Equal(t, "a tracing line without event.name", kept.At(0).Attributes().AsRaw()["message"])

	events := aepEvents(t, got)
	require.Len(t, events, 2)
	for i, want := range []struct{ typ, session string }{
		{"x.codex.otel.conversation_starts", "conv-a"}, {"x.codex.otel.api_request", "conv-b"},
	} {
		ev := events[i]
		assert.Equal(t, want.typ, ev.Type)
		assert.Equal(t, want.session, ev.Session)
		assert.Equal(t, "codex", ev.Agent)
		assert.Equal(t, "aep://otelcol/agent/codex/session/"+want.session, ev.Source)
		assert.Equal(t, int64(0), *ev.Seq)
		assert.Equal(t, aep.CaptureMetadata, ev.Capture)
	}
	assert.Equal(t, "2026-12-02T01:00:00.000Z", events[0].Time)
	assert.Equal(t, "codex", got.ResourceLogs().At(2).Resource().Attributes().AsRaw()["service.name"])
}

func TestSequencingPerSession(t *testing.T) {
	sink := new(consumertest.LogsSink)
	p := newTestProcessor(t, sink, nil)
	var checker stream.Checker
	for i := range 3 {
		e := newExport()
		lrs := e.resource(codexResource())
		at := t0.Add(time.Duration(i) * time.Second)
		addRecord(lrs, at, codexAttrs("conv-a", "codex.sse_event", map[string]any{"event.kind": "response.created"}))
		addRecord(lrs, at, codexAttrs("conv-b", "codex.sse_event", map[string]any{"event.kind": "response.created"}))
		addRecord(lrs, at, codexAttrs("conv-a", "codex.sse_event", map[string]any{"event.kind": "response.completed"}))
		require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
	}
	seqs := map[string][]int64{}
	var epochs []int64
	for _, ld := range sink.AllLogs() {
		events := aepEvents(t, ld)
		checkStream(t, &checker, events)
		for _, ev := range events {
			seqs[ev.Session] = append(seqs[ev.Session], *ev.Seq)
			epochs = append(epochs, *ev.Epoch)
		}
	}
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5}, seqs["conv-a"])
	assert.Equal(t, []int64{0, 1, 2}, seqs["conv-b"])
	for _, e := range epochs {
		assert.Equal(t, epochs[0], e)
	}
	assert.Positive(t, epochs[0])
}

// flakyConsumer refuses its first n batches with err, after passing them
// to sink (a fan-out where one branch took the batch and another refused
// it).
type flakyConsumer struct {
	consumertest.LogsSink
	refuse int
	err    error
}

func (f *flakyConsumer) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if err := f.LogsSink.ConsumeLogs(ctx, ld); err != nil {
		return err
	}
	if f.refuse > 0 {
		f.refuse--
		return f.err
	}
	return nil
}

// TestRefusedBatchGivesPositionsBack: the sender retries a refused export;
// the retry maps to the same positions and ids, so whatever took the first
// attempt sees redeliveries, and the next export continues without a gap.
func TestRefusedBatchGivesPositionsBack(t *testing.T) {
	next := &flakyConsumer{refuse: 1, err: errors.New("queue full")}
	p := newTestProcessor(t, next, func(cfg *Config) { cfg.Mode = "primary" })
	build := func(at time.Time, name string) plog.Logs {
		e := newExport()
		addRecord(e.resource(codexResource()), at, codexAttrs("conv-a", name, map[string]any{"model": "m"}))
		return e.ld
	}
	require.Error(t, p.ConsumeLogs(context.Background(), build(t0, "codex.conversation_starts")))
	require.NoError(t, p.ConsumeLogs(context.Background(), build(t0, "codex.conversation_starts")))
	require.NoError(t, p.ConsumeLogs(context.Background(), build(t0.Add(time.Second), "codex.conversation_starts")))

	var checker stream.Checker
	var got []*aep.Event
	for _, ld := range next.AllLogs() {
		events := aepEvents(t, ld)
		checkStream(t, &checker, events)
		got = append(got, events...)
	}
	require.Len(t, got, 3)
	assert.Equal(t, got[0].ID, got[1].ID, "the retry is a redelivery")
	assert.Equal(t, "session.started", got[1].Type)
	assert.Equal(t, int64(0), *got[1].Seq)
	// The session had its start on the retry, so a second start record
	// stays in the companion family, at the next position.
	assert.Equal(t, "x.codex.otel.conversation_starts", got[2].Type)
	assert.Equal(t, int64(1), *got[2].Seq)
}

// TestPermanentRefusalSpendsPositions: a permanent refusal is not retried,
// so the next records take new positions and never reuse the refused ones.
func TestPermanentRefusalSpendsPositions(t *testing.T) {
	next := &flakyConsumer{refuse: 1, err: consumererror.NewPermanent(errors.New("bad data"))}
	p := newTestProcessor(t, next, nil)
	for i, kind := range []string{"response.created", "response.completed"} {
		e := newExport()
		addRecord(e.resource(codexResource()), t0.Add(time.Duration(i)*time.Second),
			codexAttrs("conv-a", "codex.sse_event", map[string]any{"event.kind": kind}))
		err := p.ConsumeLogs(context.Background(), e.ld)
		require.Equal(t, i == 0, err != nil, "%v", err)
	}
	var checker stream.Checker
	var seqs []int64
	for _, ld := range next.AllLogs() {
		events := aepEvents(t, ld)
		checkStream(t, &checker, events)
		seqs = append(seqs, *events[0].Seq)
	}
	assert.Equal(t, []int64{0, 1}, seqs)
}

func TestPrimaryOutcomes(t *testing.T) {
	sink := new(consumertest.LogsSink)
	p := newTestProcessor(t, sink, func(cfg *Config) { cfg.Mode = "primary" })
	e := newExport()
	lrs := e.resource(codexResource())
	addRecord(lrs, t0, codexAttrs("conv-a", "codex.tool_decision", map[string]any{"tool_name": "shell", "decision": "denied", "source": "user"}))
	addRecord(lrs, t0, codexAttrs("conv-a", "codex.tool_decision", map[string]any{"tool_name": "shell", "decision": "denied", "source": "config"}))
	addRecord(lrs, t0, map[string]any{"event.name": "codex.tool_result", "tool_name": "shell", "success": "true"})
	require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
	got := sink.AllLogs()[0]
	events := aepEvents(t, got)
	require.Len(t, events, 1, "the user's deny is removed; the record without conversation.id passes through")
	assert.Equal(t, "tool.denied", events[0].Type)
	assert.Equal(t, int64(0), *events[0].Seq)
	assert.Equal(t, 2, got.LogRecordCount())
}

func TestEvictedSessionContinuesInALaterEpoch(t *testing.T) {
	sink := new(consumertest.LogsSink)
	p := newTestProcessor(t, sink, func(cfg *Config) { cfg.MaxSessions = 1 })
	// A fixed clock: only the evictions move the epoch.
	p.sessions = newSessionTable(p.cfg.MaxSessions, epoch.NewClock(func() time.Time { return t0 }))
	var checker stream.Checker
	for i, conv := range []string{"conv-a", "conv-b", "conv-a"} {
		e := newExport()
		addRecord(e.resource(codexResource()), t0.Add(time.Duration(i)*time.Second), codexAttrs(conv, "codex.api_request", nil))
		require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
	}
	var positions [][2]int64
	for _, ld := range sink.AllLogs() {
		events := aepEvents(t, ld)
		checkStream(t, &checker, events)
		positions = append(positions, [2]int64{*events[0].Epoch, *events[0].Seq})
	}
	require.Len(t, positions, 3)
	assert.Equal(t, int64(0), positions[2][1])
	assert.Greater(t, positions[2][0], positions[0][0], "conv-a came back after its eviction")
}

func TestSourceHostDisclosedFromRedacted(t *testing.T) {
	// Labels of 63 bytes each, 255 bytes in all: past a DNS name's 253.
	tooLong := strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("a", 63)
	for _, tc := range []struct {
		name  string
		level aep.Capture
		host  any
		want  string
	}{
		{"metadata hides it", aep.CaptureMetadata, "ws-7", "otelcol"},
		{"redacted discloses it", aep.CaptureRedacted, "ws-7", "ws-7"},
		{"not a host name", aep.CaptureFull, "evil/../host", "otelcol"},
		{"longer than a DNS name", aep.CaptureFull, tooLong, "otelcol"},
		{"not a string", aep.CaptureFull, int64(7), "otelcol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := new(consumertest.LogsSink)
			p := newTestProcessor(t, sink, func(cfg *Config) { cfg.Capture.Level = tc.level })
			e := newExport()
			addRecord(e.resource(map[string]any{"host.name": tc.host}), t0, codexAttrs("conv-a", "codex.api_request", nil))
			require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
			events := aepEvents(t, sink.AllLogs()[0])
			require.Len(t, events, 1)
			assert.Equal(t, "aep://"+tc.want+"/agent/codex/session/conv-a", events[0].Source)
		})
	}
}

func TestFactoryCreatesProcessor(t *testing.T) {
	f := NewFactory()
	p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(componentType), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	assert.True(t, p.Capabilities().MutatesData)
	require.NoError(t, p.Shutdown(context.Background()))
}

func TestInternalMetrics(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	cfg := createDefaultConfig().(*Config)
	cfg.Mode, cfg.MaxSessions = "primary", 1
	p, err := newProcessor(component.MustNewID("aepinbound"), cfg, tel.NewTelemetrySettings(), consumertest.NewNop())
	require.NoError(t, err)
	e := newExport()
	lrs := e.resource(codexResource())
	addRecord(lrs, t0, codexAttrs("conv-a", "codex.api_request", nil))
	addRecord(lrs, t0, codexAttrs("conv-b", "codex.tool_decision", map[string]any{"tool_name": "shell", "decision": "approved", "source": "user"}))
	addRecord(lrs, t0, map[string]any{"event.name": "codex.api_request"})
	addRecord(lrs, t0, codexAttrs(strings.Repeat("c", maxSessionBytes+1), "codex.api_request", nil))
	require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
	for outcome, want := range map[string]int64{outcomeMapped: 1, outcomeSkipped: 1, outcomeNoSession: 2} {
		assert.Equal(t, want, telemetrytest.Counter(t, tel, "otelcol_aepinbound_records",
			attribute.String("agent", "codex"), attribute.String("outcome", outcome)), outcome)
	}
	assert.Equal(t, int64(1), telemetrytest.Counter(t, tel, "otelcol_aepinbound_sessions_evicted"))
}

// TestReloadStartsALaterEpoch: a processor rebuilt within the second its
// predecessor started in (a config reload, no storage) continues a session
// at seq 0 in a later epoch, never at a position the predecessor used.
func TestReloadStartsALaterEpoch(t *testing.T) {
	var checker stream.Checker
	for i, name := range []string{"codex.api_request", "codex.sse_event"} {
		sink := new(consumertest.LogsSink)
		p := newTestProcessor(t, sink, nil)
		e := newExport()
		addRecord(e.resource(codexResource()), t0.Add(time.Duration(i)*time.Second), codexAttrs("conv-a", name, nil))
		require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
		checkStream(t, &checker, aepEvents(t, sink.AllLogs()[0]))
	}
}

// TestRecordsAlreadyAEPAreRemoved: the otlp receiver takes anyone's
// export, so a record that arrives as AEP (a command's projection, or any
// event under the collector's relay identity) never passes through; the
// vendor's records and the others still do.
func TestRecordsAlreadyAEPAreRemoved(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.LogsSink)
	p, err := newProcessor(component.MustNewID("aepinbound"), createDefaultConfig().(*Config), tel.NewTelemetrySettings(), sink)
	require.NoError(t, err)
	e := newExport()
	lrs := e.resource(map[string]any{"service.name": "openhands"})
	for _, ev := range []*aep.Event{
		{AEP: aep.Version, ID: "cmd-1", Type: "control.pause", Time: "2026-12-02T01:00:00Z",
			Source: "aep://ops/agent/mission-control", Agent: "openhands", Session: "conv-a", Capture: aep.CaptureMetadata},
		{AEP: aep.Version, ID: "cmd-2", Type: "x.openhands.control.send_input", Time: "2026-12-02T01:00:00Z",
			Source: "aep://ops/agent/mission-control", Agent: "openhands", Session: "conv-a", Capture: aep.CaptureRedacted,
			Data: map[string]any{"text": "rm -rf ~"}},
		{AEP: aep.Version, ID: "forged", Type: "session.ended", Time: "2026-12-02T01:00:00Z",
			Source: "aep://otelcol/agent/openhands/session/conv-a", Agent: "openhands", Session: "conv-a",
			Seq: aep.Int64(7), Epoch: aep.Int64(0), Capture: aep.CaptureMetadata, Data: map[string]any{}},
	} {
		require.NoError(t, projection.ToLogRecord(ev, lrs.AppendEmpty(), projection.Options{}))
	}
	addRecord(lrs, t0, map[string]any{"http.route": "/pay"})
	addRecord(e.resource(codexResource()), t0, codexAttrs("conv-b", "codex.api_request", nil))

	require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
	got := sink.AllLogs()[0]
	events := aepEvents(t, got)
	require.Len(t, events, 1, "only the vendor record's own event is AEP")
	assert.Equal(t, "x.codex.otel.api_request", events[0].Type)
	assert.Equal(t, 2, got.LogRecordCount(), "the codex event and the record that is not AEP")
	assert.Equal(t, int64(3), telemetrytest.Counter(t, tel, "otelcol_aepinbound_aep_refused"))
}
