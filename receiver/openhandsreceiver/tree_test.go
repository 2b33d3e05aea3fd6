package openhandsreceiver

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// waitFirst waits for the session's first event of type typ.
func (h *harness) waitFirst(session, typ string) *aep.Event {
	h.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		for _, ev := range h.session(session) {
			if ev.Type == typ {
				return ev
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("session %s emitted %v, no %s", session, types(h.session(session)), typ)
		}
		time.Sleep(tick)
	}
}

// TestConversationTree: the agent of a running conversation starts a child
// with start_child_conversation; the child's session.started names the
// parent and its run, the parent's session carries
// delegation.subagent.started after the call's answer and
// delegation.subagent.stopped once search shows the child finished; a fork
// names its source conversation and event.
func TestConversationTree(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		parent, h := watchRunning(t, stub, socket)
		h.waitTypes(parent.ID(), "run.started", "state.delta")
		run := "run:" + parent.ID() + ":1"

		action := mustAppend(t, parent, oh.StartChildAction("write the tests", "tests"))
		launch, err := parent.StartChild("write the tests", "tests")
		require.NoError(t, err)
		mustAppend(t, parent, oh.StartChildObservation(action, launch))
		got := h.waitTypes(parent.ID(), "tool.completed", "delegation.subagent.started")
		completed, started := got[len(got)-2], got[len(got)-1]
		assert.Equal(t, completed.ID, started.Cause, "cause-linked to the call's answer")
		assert.Equal(t, run, started.Run)
		assert.Equal(t, map[string]any{"session": launch.ConversationID, "agent": "openhands"}, started.Data["child"])
		assert.NotEmpty(t, started.Traceparent)

		childStarted := h.waitFirst(launch.ConversationID, "session.started")
		assert.Equal(t, map[string]any{"session": parent.ID(), "agent": "openhands", "run": run}, childStarted.Data["parent"])

		child, ok := stub.Conversation(launch.ConversationID)
		require.True(t, ok)
		mustStatus(t, child, oh.StatusFinished)
		stopped := h.waitFirst(parent.ID(), "delegation.subagent.stopped")
		assert.Equal(t, started.ID, stopped.Cause)
		assert.Equal(t, run, stopped.Run)
		require.NotEmpty(t, stopped.Traceparent)
		assert.Equal(t, started.Traceparent[:35], stopped.Traceparent[:35], "in the run's trace")
		assert.Equal(t, oh.StatusFinished, stopped.Data["status"])
		assert.Equal(t, started.Data["child"], stopped.Data["child"])

		fork, err := parent.Fork(oh.ForkOptions{FromEventID: action.ID()})
		require.NoError(t, err)
		forkStarted := h.waitFirst(fork.ID(), "session.started")
		assert.Equal(t, map[string]any{"session": parent.ID(), "event": action.ID()}, forkStarted.Data["x.openhands.forked_from"])
		assert.Nil(t, forkStarted.Data["parent"], "a fork is no child")

		h.waitTypes(child.ID(), "state.delta", "run.finished")
		assert.Equal(t, 1, count(h.session(parent.ID()), "delegation.subagent.stopped"), "a child stops once, whatever the polls show")
		assertChildSpansWithRecords(t, h.sink.AllLogs(), child.ID(), completed.Traceparent)
		h.validate()
		assertReadOnly(t, stub)
	})
}

// TestTreeIDsNotUUIDsAreLeftOut: a tree field that is not a UUID is left
// out of session.started, with a warning; the conversation is observed.
func TestTreeIDsNotUUIDsAreLeftOut(t *testing.T) {
	stub := startStub(t)
	id, source := oh.NewUUID(), oh.NewUUID()
	front, _ := startFront(t, stub, "", injectSearchItems(t, stub, "",
		`{"id":"`+id+`","execution_status":"idle","created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-01T10:00:00Z",`+
			`"parent_conversation_id":"../../x","forked_from_conversation_id":"`+source+`","forked_from_event_id":"<script>"}`))
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].Endpoint = front.URL
	core, logs := observer.New(zapcore.WarnLevel)
	h := startHarnessLogging(t, cfg, nil, zap.New(core))

	started := h.waitFirst(id, "session.started")
	assert.Nil(t, started.Data["parent"])
	assert.Equal(t, map[string]any{"session": source}, started.Data["x.openhands.forked_from"])
	require.Eventually(t, func() bool {
		return logs.FilterMessageSnippet("tree field is not a UUID").FilterField(zap.String("field", "parent_conversation_id")).Len() > 0 &&
			logs.FilterMessageSnippet("tree field is not a UUID").FilterField(zap.String("field", "forked_from_event_id")).Len() > 0
	}, waitFor, tick)
}

// idInShard is a fresh conversation id that shard index of count owns.
func idInShard(index, count int) string {
	for {
		if id := oh.NewUUID(); shardOf(id, count) == index {
			return id
		}
	}
}

// TestChildOfAnotherReplicasParent: parent and child are observed by two
// replicas. The child's session.started names the parent without its run
// (its replica does not observe the parent); the parent's replica still
// reports the child stopped, from what search shows of a conversation it
// does not own.
func TestChildOfAnotherReplicasParent(t *testing.T) {
	stub := startStub(t)
	parent, err := stub.CreateConversation(oh.ConversationOptions{ID: idInShard(0, 2)})
	require.NoError(t, err)
	replica := func(index int) *harness {
		cfg := fastConfig(socketSession, stub)
		cfg.Shard = ShardConfig{Index: &index, Count: 2}
		return startHarness(t, cfg)
	}
	a, b := replica(0), replica(1)
	a.waitLive(parent, 1)
	mustStatus(t, parent, oh.StatusRunning)
	a.waitTypes(parent.ID(), "run.started", "state.delta")

	child, err := stub.CreateConversation(oh.ConversationOptions{ID: idInShard(1, 2), Parent: parent.ID(), Status: oh.StatusRunning})
	require.NoError(t, err)
	childStarted := b.waitFirst(child.ID(), "session.started")
	assert.Equal(t, map[string]any{"session": parent.ID(), "agent": "openhands"}, childStarted.Data["parent"],
		"the parent's run is known only where the parent is observed")

	action := mustAppend(t, parent, oh.StartChildAction("task", ""))
	mustAppend(t, parent, oh.StartChildObservation(action, oh.ChildLaunch{
		ConversationID: child.ID(), ParentConversationID: parent.ID(), Status: oh.StatusRunning, Isolation: "shared",
	}))
	started := a.waitFirst(parent.ID(), "delegation.subagent.started")
	mustStatus(t, child, oh.StatusError)
	stopped := a.waitFirst(parent.ID(), "delegation.subagent.stopped")
	assert.Equal(t, started.ID, stopped.Cause)
	assert.Equal(t, oh.StatusError, stopped.Data["status"])

	assert.Empty(t, a.session(child.ID()), "one observer per session")
	assert.Empty(t, b.session(parent.ID()))
	b.waitTypes(child.ID(), "run.failed")
	assertChildSpansWithRecords(t, append(a.sink.AllLogs(), b.sink.AllLogs()...), child.ID(), "")
	a.validate()
	b.validate()
}

// A child that stops while its parent's run.finished waits for its usage
// comes after that run.finished, as it does after any other event: the
// decorator releases what it holds before anything else goes out.
func TestChildStopAfterHeldRunFinished(t *testing.T) {
	const child = "7d1e2f30-4a5b-4c6d-8e9f-a0b1c2d3e4f5"
	sink := new(consumertest.LogsSink)
	s := offlineConversationTo(t, "parent", createDefaultConfig().(*Config), sink).session
	ctx := context.Background()
	ts := func(i int) string {
		return historyStart.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000000")
	}
	state := func(i int, key string, value any) map[string]any {
		return map[string]any{"id": fmt.Sprintf("s%d", i), "timestamp": ts(i), "kind": "ConversationStateUpdateEvent",
			"source": "environment", "key": key, "value": value}
	}
	for i, fields := range []map[string]any{
		state(0, "stats", statsValue(100, 1)),
		state(1, "execution_status", "running"),
		{"id": "act", "timestamp": ts(2), "kind": "ActionEvent", "source": "agent", "tool_name": "start_child_conversation",
			"tool_call_id": "call", "llm_response_id": "resp", "action": map[string]any{"kind": "StartChildConversationAction"}},
		{"id": "obs", "timestamp": ts(3), "kind": "ObservationEvent", "source": "environment", "tool_name": "start_child_conversation",
			"tool_call_id": "call", "action_id": "act",
			"observation": map[string]any{"kind": "StartChildConversationObservation", "conversation_id": child}},
		state(4, "execution_status", "finished"),
	} {
		s.process(ctx, eventOf(t, fields), legacyHistory, false)
		require.Equal(t, i == 4, s.decorator.Holding(), "run.finished waits for the stats of its LLM response")
	}
	s.flush(ctx)
	s.childStatus(ctx, child, oh.StatusFinished)

	got := types(aeptest.EventsOf(t, sink.AllLogs()...))
	require.Contains(t, got, "delegation.subagent.stopped")
	require.Contains(t, got, "run.finished")
	assert.Less(t, slices.Index(got, "run.finished"), slices.Index(got, "delegation.subagent.stopped"))
}

// TestTreeByPush: with discovery by push and no poll due (poll_interval
// 1h), the tree needs no poll. The server pushes no ConversationInfo when a
// conversation finishes: a child's stop reaches its parent from the
// child's own stream, also when the child stopped before the parent's
// announcement was mapped. A fork, which the server announces to no
// webhook, is found by its first event batch (its subscription's state
// snapshot).
func TestTreeByPush(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub, h := startPushOnly(t, socket)
		parent, err := stub.CreateConversation(oh.ConversationOptions{Status: oh.StatusRunning})
		require.NoError(t, err)
		waitSockets(t, parent, 1)
		launchChild := func(task string) (oh.Event, *oh.Conversation, oh.ChildLaunch) {
			action := mustAppend(t, parent, oh.StartChildAction(task, ""))
			launch, err := parent.StartChild(task, "")
			require.NoError(t, err)
			child, ok := stub.Conversation(launch.ConversationID)
			require.True(t, ok)
			h.waitFirst(child.ID(), "session.started")
			return action, child, launch
		}

		action, first, launch := launchChild("stops after its announcement")
		mustAppend(t, parent, oh.StartChildObservation(action, launch))
		started := h.waitFirst(parent.ID(), "delegation.subagent.started")
		waitSockets(t, first, 1)
		mustStatus(t, first, oh.StatusFinished)
		stopped := h.waitFirst(parent.ID(), "delegation.subagent.stopped")
		assert.Equal(t, started.ID, stopped.Cause)
		assert.Equal(t, oh.StatusFinished, stopped.Data["status"])

		action, second, launch := launchChild("stops before its announcement")
		waitSockets(t, second, 1)
		mustStatus(t, second, oh.StatusError)
		h.waitTypes(second.ID(), "run.failed")
		mustAppend(t, parent, oh.StartChildObservation(action, launch))
		require.Eventually(t, func() bool { return count(h.session(parent.ID()), "delegation.subagent.stopped") == 2 }, waitFor, tick)
		var stops []any
		for _, ev := range h.session(parent.ID()) {
			if ev.Type == "delegation.subagent.stopped" {
				stops = append(stops, ev.Data["child"].(map[string]any)["session"], ev.Data["status"])
			}
		}
		assert.Equal(t, []any{first.ID(), oh.StatusFinished, second.ID(), oh.StatusError}, stops)

		fork, err := parent.Fork(oh.ForkOptions{FromEventID: action.ID()})
		require.NoError(t, err)
		forkStarted := h.waitFirst(fork.ID(), "session.started")
		assert.Equal(t, map[string]any{"session": parent.ID(), "event": action.ID()}, forkStarted.Data["x.openhands.forked_from"])
		h.validate()
	})
}

// assertChildSpansWithRecords feeds the receivers' records to the aep
// connector: each span of the child session is in the trace its log
// records name. With call, the traceparent of the delegating call's
// tool.completed (the child's session.started named the parent's run),
// that is the parent's trace, and the child's runs are under the call.
func assertChildSpansWithRecords(t *testing.T, logs []plog.Logs, child, call string) {
	t.Helper()
	f := aepconnector.NewFactory()
	sink := new(consumertest.TracesSink)
	conn, err := f.CreateLogsToTraces(context.Background(), connectortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	recordTrace := map[pcommon.SpanID]pcommon.TraceID{}
	for _, ld := range logs {
		for _, ev := range aeptest.EventsOf(t, ld) {
			if trace, span, ok := runtrace.ParseTraceparent(ev.Traceparent); ok && ev.Session == child {
				recordTrace[span] = trace
			}
		}
		require.NoError(t, conn.ConsumeLogs(context.Background(), ld))
	}
	callTrace, callSpan, delegated := runtrace.ParseTraceparent(call)
	spans, runs := 0, 0
	for _, td := range sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if session, _ := s.Attributes().Get("session.id"); session.Str() != child {
						continue
					}
					spans++
					assert.Equal(t, recordTrace[s.SpanID()], s.TraceID(), "span %s is in the trace its records name", s.Name())
					if op, _ := s.Attributes().Get("gen_ai.operation.name"); delegated && op.Str() == "invoke_agent" {
						runs++
						assert.Equal(t, pcommon.TraceID(callTrace), s.TraceID(), "the child's run %s is in the parent's trace", s.Name())
						assert.Equal(t, pcommon.SpanID(callSpan), s.ParentSpanID(), "the child's run %s is under the delegating call", s.Name())
					}
				}
			}
		}
	}
	assert.NotZero(t, spans, "the child's spans")
	assert.Equal(t, delegated, runs > 0, "the child's runs under the delegating call")
}
