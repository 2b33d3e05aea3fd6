package e2e

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrysink"
)

// env is one pipeline under test with its three ends: the stub agent
// server it observes, the relay and the OTLP sink it exports to.
type env struct {
	t     *testing.T
	stub  *oh.Server
	relay *aeprelaytest.Relay
	otlp  *telemetrysink.Logs
}

// newEnv starts the stub, the relay and the sink; start starts the
// collector, so that a test can break an end before the collector sees it.
func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{
		t:     t,
		stub:  oh.Start(t, oh.Config{SessionAPIKeys: []string{stubKey}}),
		relay: aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken, DrainTimeout: time.Second}),
		otlp:  startOTLPSink(t),
	}
}

// start runs the collector with cfg completed by the ends of e.
func (e *env) start(cfg pipelineConfig) {
	e.t.Helper()
	cfg.agentServer, cfg.relay, cfg.otlp = e.stub.URL(), e.relay.URL(), e.otlp.URL()
	startCollector(e.t, cfg)
}

func (e *env) newConversation() *oh.Conversation {
	e.t.Helper()
	c, err := e.stub.CreateConversation(oh.ConversationOptions{})
	require.NoError(e.t, err)
	return c
}

// relayEvents returns the session's events the relay admitted, one per
// (source, id), in (epoch, seq) order; commands (which carry no seq) are
// left out.
func (e *env) relayEvents(session string) []*aep.Event {
	var out []*aep.Event
	for _, rec := range e.relay.Events() {
		if rec.Event.Session == session && rec.Event.Seq != nil {
			out = append(out, rec.Event)
		}
	}
	sortByPosition(out)
	return out
}

// otlpEvents returns the session's events rebuilt from the OTLP records,
// in (epoch, seq) order.
func (e *env) otlpEvents(session string) []*aep.Event {
	e.t.Helper()
	var out []*aep.Event
	for _, r := range e.otlp.Records() {
		ev, err := projection.FromLogRecord(r.Record, r.Resource)
		require.NoError(e.t, err, "an OTLP record is not an AEP event")
		if ev.Session == session {
			out = append(out, ev)
		}
	}
	sortByPosition(out)
	return out
}

func sortByPosition(evs []*aep.Event) {
	slices.SortStableFunc(evs, func(a, b *aep.Event) int {
		return cmp.Or(cmp.Compare(a.EffectiveEpoch(), b.EffectiveEpoch()), cmp.Compare(seqOf(a), seqOf(b)))
	})
}

func seqOf(ev *aep.Event) int64 {
	if ev.Seq == nil {
		return -1
	}
	return *ev.Seq
}

// types lists the events' types, connect-time and end-of-run
// state.snapshot events left out: their number depends on reconnects.
func types(evs []*aep.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type != "state.snapshot" {
			out = append(out, ev.Type)
		}
	}
	return out
}

// awaitTypes waits until the session's types at the relay, in position
// order and without snapshots, end with want; it returns the events.
func (e *env) awaitTypes(conv *oh.Conversation, want ...string) []*aep.Event {
	e.t.Helper()
	return awaitEvents(e.t, "relay", func() []*aep.Event { return e.relayEvents(conv.ID()) }, endsWith(want))
}

// awaitOTLPTypes is awaitTypes on the OTLP side.
func (e *env) awaitOTLPTypes(conv *oh.Conversation, want ...string) []*aep.Event {
	e.t.Helper()
	return awaitEvents(e.t, "OTLP sink", func() []*aep.Event { return e.otlpEvents(conv.ID()) }, endsWith(want))
}

// awaitLive waits until the conversation's n-th connection has drained its
// history: the receiver emits its connect-time snapshot after the history,
// so from then on what the stub appends reaches the receiver live.
func (e *env) awaitLive(conv *oh.Conversation, n int) {
	e.t.Helper()
	awaitEvents(e.t, "relay", func() []*aep.Event { return e.relayEvents(conv.ID()) }, connections(n))
}

// awaitOTLPLive is awaitLive on the OTLP side.
func (e *env) awaitOTLPLive(conv *oh.Conversation, n int) {
	e.t.Helper()
	awaitEvents(e.t, "OTLP sink", func() []*aep.Event { return e.otlpEvents(conv.ID()) }, connections(n))
}

// connections holds once the session shows the connect-time snapshots of n
// connections.
func connections(n int) func([]*aep.Event) bool {
	return func(evs []*aep.Event) bool { return countType(evs, "state.snapshot") >= n }
}

func endsWith(want []string) func([]*aep.Event) bool {
	return func(evs []*aep.Event) bool {
		got := types(evs)
		return len(got) >= len(want) && slices.Equal(got[len(got)-len(want):], want)
	}
}

// awaitEvents polls list until done holds, for at most waitFor.
func awaitEvents(t *testing.T, where string, list func() []*aep.Event, done func([]*aep.Event) bool) []*aep.Event {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		evs := list()
		if done(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: gave up after %s; the session's types are %v", where, waitFor, types(evs))
		}
		time.Sleep(tick)
	}
}

func countType(evs []*aep.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func last(evs []*aep.Event, typ string) *aep.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	return nil
}

// verify is what every test asserts once its scenario is over: the relay
// saw no broken rule, every vendor event of convs reached it exactly once
// as the AEP event its kind maps to, each session's replay buffer is gap
// free in (epoch, seq) order, and the OTLP sink got the same events.
func (e *env) verify(convs ...*oh.Conversation) {
	e.t.Helper()
	e.settle()
	for _, v := range e.relay.Violations() {
		e.t.Errorf("relay: %s", v)
	}
	for _, conv := range convs {
		evs := e.relayEvents(conv.ID())
		assertEveryVendorEventOnce(e.t, evs, conv)
		assertBufferGapFree(e.t, e.relay, evs)
	}
	e.assertOTLPMatchesRelay()
}

// expectedType is the AEP type a persisted vendor event maps to (its
// first output; status changes add run and attention events beside it).
func expectedType(ve oh.Event) (string, bool) {
	switch ve.Kind() {
	case oh.KindMessageEvent:
		return "x.openhands.message.event", true
	case oh.KindActionEvent:
		return "tool.requested", true
	case oh.KindObservationEvent:
		if obs, _ := ve["observation"].(map[string]any); obs["is_error"] == true {
			return "tool.failed", true
		}
		return "tool.completed", true
	case oh.KindAgentErrorEvent:
		return "tool.failed", true
	case oh.KindConversationStateUpdateEvent:
		return "state.delta", true // full_state is never persisted
	case oh.KindUserRejectObservation:
		if ve["rejection_source"] == "hook" {
			return "tool.denied", true
		}
		return "x.openhands.user_reject.observation", true
	case oh.KindPauseEvent:
		return "x.openhands.pause.event", true
	case oh.KindInterruptEvent:
		return "x.openhands.interrupt.event", true
	}
	return "", false
}

// assertEveryVendorEventOnce checks that each event in conv's persisted
// log reached the relay exactly once as its AEP type. evs hold one event
// per (source, id), so a vendor event mapped twice shows up as two ids.
func assertEveryVendorEventOnce(t *testing.T, evs []*aep.Event, conv *oh.Conversation) {
	t.Helper()
	got := map[string]map[string]int{} // vendor id → AEP type → events
	for _, ev := range evs {
		vid, _ := ev.Data["vendor_event_id"].(string)
		if vid == "" {
			continue
		}
		if got[vid] == nil {
			got[vid] = map[string]int{}
		}
		got[vid][ev.Type]++
	}
	log := conv.Events()
	require.NotEmpty(t, log, "conversation %s has no events", conv.ID())
	for _, ve := range log {
		want, ok := expectedType(ve)
		if !assert.True(t, ok, "no expected AEP type for vendor kind %s", ve.Kind()) {
			continue
		}
		assert.Equal(t, 1, got[ve.ID()][want], "vendor %s %s must reach the relay once as %s; it produced %v",
			ve.Kind(), ve.ID(), want, got[ve.ID()])
	}
}

// assertBufferGapFree checks the relay's replay buffer of the session of
// evs: it holds each of them once, in (epoch, seq) order, and every epoch
// counts from 0 without a hole. The receiver assigns positions in one place
// and never skips one (it would only for an event the projection refuses,
// which is a bug), so any hole is a lost event; a new epoch restarting seq
// is the only legal discontinuity.
func assertBufferGapFree(t *testing.T, relay *aeprelaytest.Relay, evs []*aep.Event) {
	t.Helper()
	require.NotEmpty(t, evs)
	source, session := evs[0].Source, evs[0].Session
	buffer := relay.SessionEvents(source, session)
	assert.Len(t, buffer, len(evs), "session %s: buffer entries vs distinct events", session)
	epoch, next := int64(-1), int64(0)
	for i, rec := range buffer {
		ev := rec.Event
		if !assert.NotNil(t, ev.Seq, "session %s: %s %s has no seq", session, ev.Type, ev.ID) {
			continue
		}
		if e := ev.EffectiveEpoch(); e != epoch {
			assert.Greater(t, e, epoch, "session %s: epoch goes back at buffer position %d", session, i)
			epoch, next = e, 0
		}
		assert.Equal(t, next, *ev.Seq, "session %s, epoch %d: seq at buffer position %d (%s)", session, epoch, i, ev.Type)
		next = *ev.Seq + 1
	}
}

// otelSeverity is the AEP-0005 §3 severity projection.
var otelSeverity = map[aep.Severity]struct {
	text   string
	number int32
}{
	aep.SeverityDebug:    {"DEBUG", 5},
	aep.SeverityInfo:     {"INFO", 9},
	aep.SeverityNotice:   {"INFO2", 10},
	aep.SeverityWarning:  {"WARN", 13},
	aep.SeverityError:    {"ERROR", 17},
	aep.SeverityCritical: {"FATAL", 21},
}

// settleFor is how long both ends must hold the same events, unchanged,
// for the pipeline to count as drained: many batch timeouts and polls.
const settleFor = 150 * time.Millisecond

// settle waits until the relay and the OTLP sink hold the same set of
// events and have not changed for settleFor, so that the checks that
// follow read a drained pipeline (a connect-time snapshot may still be on
// its way when the events a test awaited have arrived).
func (e *env) settle() {
	e.t.Helper()
	var last string
	stableSince := time.Now()
	deadline := stableSince.Add(waitFor)
	for {
		relayed, exported := e.relayKeys(), e.otlpKeys()
		state := fmt.Sprint(len(relayed), len(exported), e.relay.Received())
		missing, extra := difference(relayed, exported), difference(exported, relayed)
		if state != last || missing+extra > 0 {
			last, stableSince = state, time.Now()
		}
		if missing+extra == 0 && time.Since(stableSince) >= settleFor {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the pipeline never drained: the OTLP sink lacks %d of the relay's %d events and has %d it lacks",
				missing, len(relayed), extra)
		}
		time.Sleep(tick)
	}
}

type eventKey struct{ source, id string }

func (e *env) relayKeys() map[eventKey]int {
	keys := map[eventKey]int{}
	for _, rec := range e.relay.Events() {
		if rec.Event.Seq != nil { // commands are not ours
			keys[eventKey{rec.Event.Source, rec.Event.ID}]++
		}
	}
	return keys
}

func (e *env) otlpKeys() map[eventKey]int {
	keys := map[eventKey]int{}
	for _, r := range e.otlp.Records() {
		keys[otlpKey(r)]++
	}
	return keys
}

// otlpKey names the event an OTLP record carries.
func otlpKey(r telemetrysink.LogRecord) eventKey {
	attrs := r.Record.Attributes()
	source, _ := attrs.Get(projection.AttrSource)
	id, _ := attrs.Get(projection.AttrEventID)
	return eventKey{source.AsString(), id.AsString()}
}

// difference counts the keys of a that b lacks.
func difference(a, b map[eventKey]int) int {
	n := 0
	for k := range a {
		if _, ok := b[k]; !ok {
			n++
		}
	}
	return n
}

// assertOTLPMatchesRelay checks, on a settled pipeline, that every event
// the relay admitted was exported once as an OTLP record with the
// AEP-0005 §3 attributes of its event and the lossless extras that rebuild
// it exactly.
func (e *env) assertOTLPMatchesRelay() {
	t := e.t
	t.Helper()
	relayed := map[eventKey]*aep.Event{}
	for _, rec := range e.relay.Events() {
		relayed[eventKey{rec.Event.Source, rec.Event.ID}] = rec.Event
	}
	assert.Empty(t, e.otlp.Refused(), "the sink refused exports")
	for _, r := range e.otlp.Records() {
		ev := relayed[otlpKey(r)]
		if !assert.NotNil(t, ev, "OTLP record %v has no counterpart at the relay", otlpKey(r)) {
			continue
		}
		assertProjected(t, r, ev)
	}
	for k, n := range e.otlpKeys() {
		assert.Equal(t, 1, n, "OTLP records of %v", k)
	}
}

// assertProjected checks one OTLP record against the event the relay got.
func assertProjected(t *testing.T, r telemetrysink.LogRecord, ev *aep.Event) {
	t.Helper()
	lr := r.Record
	attrs := lr.Attributes()
	str := func(key string) string {
		v, ok := attrs.Get(key)
		if !ok {
			return ""
		}
		return v.AsString()
	}
	integer := func(key string) int64 {
		v, ok := attrs.Get(key)
		assert.True(t, ok, "%s %s: no %s", ev.Type, ev.ID, key)
		return v.Int()
	}
	assert.Equal(t, projection.EventNamePrefix+ev.Type, lr.EventName(), ev.ID)
	assert.Equal(t, ev.Agent, str(projection.AttrAgentID), ev.ID)
	assert.Equal(t, ev.Session, str(projection.AttrSessionID), ev.ID)
	assert.Equal(t, ev.Run, str(projection.AttrRunID), ev.ID)
	assert.Equal(t, string(ev.EffectiveCapture()), str(projection.AttrCapture), ev.ID)
	if assert.NotNil(t, ev.Seq, ev.ID) && assert.NotNil(t, ev.Epoch, ev.ID) {
		assert.Equal(t, *ev.Seq, integer(projection.AttrSequence), ev.ID)
		assert.Equal(t, *ev.Epoch, integer(projection.AttrEpoch), ev.ID)
	}
	severity := otelSeverity[ev.EffectiveSeverity()]
	assert.Equal(t, severity.text, lr.SeverityText(), ev.ID)
	assert.Equal(t, severity.number, int32(lr.SeverityNumber()), ev.ID)
	serviceName, _ := r.Resource.Attributes().Get(projection.AttrServiceName)
	assert.Equal(t, ev.Agent, serviceName.AsString(), ev.ID)

	rebuilt, err := projection.FromLogRecord(lr, r.Resource)
	if !assert.NoError(t, err, ev.ID) {
		return
	}
	want, err := aep.Canonical(ev)
	require.NoError(t, err)
	got, err := aep.Canonical(rebuilt)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got), "the OTLP record and the relay's envelope of %s %s differ", ev.Type, ev.ID)
}
