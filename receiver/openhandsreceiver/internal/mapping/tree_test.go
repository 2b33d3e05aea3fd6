package mapping

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

const (
	testChild  = "7d1e2f30-4a5b-4c6d-8e9f-a0b1c2d3e4f5"
	testParent = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
)

// childLaunch is the ObservationEvent of a start_child_conversation call
// as the 1.58.2 server publishes it: the observation carries the child's
// id (tools/child_conversation/impl.py).
func childLaunch(tb testing.TB, childID string, isError bool) Event {
	tb.Helper()
	obs := map[string]any{
		"kind":     "StartChildConversationObservation",
		"content":  []any{map[string]any{"type": "text", "text": "Started child conversation " + childID}},
		"is_error": isError,
	}
	if childID != "" {
		obs["conversation_id"] = childID
		obs["parent_conversation_id"] = testConversation
		obs["status"] = "running"
	}
	return vendorEvent(tb, map[string]any{
		"kind": "ObservationEvent", "id": "obs-child", "timestamp": "2026-07-12T10:15:02.000001",
		"source": "environment", "tool_name": startChildTool, "tool_call_id": "call-child",
		"action_id": "act-child", "observation": obs,
	})
}

func TestStartLineage(t *testing.T) {
	created := time.Date(2026, 7, 12, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		lineage Lineage
		want    map[string]any
	}{
		{"a top-level conversation has none", Lineage{}, map[string]any{}},
		{
			"a child names its parent session and agent",
			Lineage{ParentSession: testParent},
			map[string]any{"parent": map[string]any{"session": testParent, "agent": DefaultAgent}},
		},
		{
			"a child whose parent's run is known names it",
			Lineage{ParentSession: testParent, ParentRun: "run:" + testParent + ":2"},
			map[string]any{"parent": map[string]any{"session": testParent, "agent": DefaultAgent, "run": "run:" + testParent + ":2"}},
		},
		{
			"a fork names its source conversation and event",
			Lineage{ForkedFrom: testParent, ForkedAt: "ev-41"},
			map[string]any{forkedFromField: map[string]any{"session": testParent, "event": "ev-41"}},
		},
		{
			"a whole-conversation fork names no event",
			Lineage{ForkedFrom: testParent},
			map[string]any{forkedFromField: map[string]any{"session": testParent}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(aep.CaptureMetadata, false)
			cfg.Lineage = tc.lineage
			ev := newConversation(t, cfg).Start(created, received)
			requireValid(t, []*aep.Event{ev})
			want := map[string]any{"client": map[string]any{"name": "openhands-agent-server"}, "server": testHost}
			for k, v := range tc.want {
				want[k] = v
			}
			assert.Equal(t, want, ev.Data)
		})
	}
}

func TestSubagentStarted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		launch  func(testing.TB) Event
		started bool
	}{
		{"a launch naming the child", func(tb testing.TB) Event { return childLaunch(tb, testChild, false) }, true},
		{"the child id in the paging form", func(tb testing.TB) Event {
			return childLaunch(tb, "7d1e2f304a5b4c6d8e9fa0b1c2d3e4f5", false)
		}, true},
		{"a failed launch", func(tb testing.TB) Event { return childLaunch(tb, "", true) }, false},
		{"a child id that is no conversation id", func(tb testing.TB) Event { return childLaunch(tb, "../../x", false) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(aep.CaptureMetadata, false))
			out := feed(t, c, stateEvent(t, "s1", StatusRunning), tc.launch(t))
			requireValid(t, out)
			started := findType(out, typeSubagentStarted)
			if !tc.started {
				assert.Nil(t, started)
				return
			}
			require.NotNil(t, started)
			answer := out[len(out)-2]
			assert.Contains(t, []string{"tool.completed"}, answer.Type, "it follows the call's answer")
			assert.Equal(t, answer.ID, started.Cause)
			assert.Equal(t, "run:"+testConversation+":1", started.Run)
			assert.Equal(t, map[string]any{"session": testChild, "agent": DefaultAgent}, started.Data["child"])
			assert.Equal(t, map[string]any{"name": startChildTool, "call_id": "call-child"}, started.Data["tool"])
		})
	}
}

func TestSubagentStopped(t *testing.T) {
	later := received.Add(time.Minute)
	for _, tc := range []struct {
		name, child, status string
		stopped             bool
	}{
		{"finished", testChild, StatusFinished, true},
		{"error", testChild, StatusError, true},
		{"stuck", testChild, StatusStuck, true},
		{"deleted", testChild, StatusDeleting, true},
		{"still running", testChild, StatusRunning, false},
		{"idle before its first run", testChild, StatusIdle, false},
		{"paused", testChild, StatusPaused, false},
		{"a child it did not start", testParent, StatusFinished, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(aep.CaptureMetadata, false))
			out := feed(t, c, stateEvent(t, "s1", StatusRunning), childLaunch(t, testChild, false))
			stopped := c.SubagentStopped(tc.child, tc.status, later)
			if !tc.stopped {
				assert.Nil(t, stopped)
				return
			}
			require.NotNil(t, stopped)
			requireValid(t, []*aep.Event{stopped})
			assert.Equal(t, findType(out, typeSubagentStarted).ID, stopped.Cause)
			assert.Equal(t, "run:"+testConversation+":1", stopped.Run)
			assert.Equal(t, map[string]any{"session": testChild, "agent": DefaultAgent}, stopped.Data["child"])
			assert.Equal(t, tc.status, stopped.Data["status"])
			assert.Nil(t, c.SubagentStopped(tc.child, tc.status, later), "a child stops once")
		})
	}
}

func TestSubagentSurvivesRestore(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	out := feed(t, c, stateEvent(t, "s1", StatusRunning), childLaunch(t, testChild, false))
	state := *c.s
	restored, err := NewConversation(testConfig(aep.CaptureMetadata, false), &state)
	require.NoError(t, err)
	stopped := restored.SubagentStopped(testChild, StatusFinished, received)
	require.NotNil(t, stopped)
	assert.Equal(t, findType(out, typeSubagentStarted).ID, stopped.Cause)
}

func TestSubagentStoppedAfterSessionEnded(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	feed(t, c, stateEvent(t, "s1", StatusRunning), childLaunch(t, testChild, false), stateEvent(t, "s2", StatusDeleting))
	assert.Nil(t, c.SubagentStopped(testChild, StatusFinished, received))
}

// A conversation waits to see at most maxOpenChildren children stop: a
// child started past them gets no delegation.subagent.stopped, and the
// ones it waits for still do.
func TestOpenChildrenAreBounded(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	feed(t, c, stateEvent(t, "s1", StatusRunning))
	children := make([]string, maxOpenChildren+1)
	for i := range children {
		children[i] = fmt.Sprintf("7d1e2f30-4a5b-4c6d-8e9f-%012x", i)
		require.NotNil(t, findType(feed(t, c, childLaunch(t, children[i], false)), typeSubagentStarted))
	}
	assert.Nil(t, c.SubagentStopped(children[maxOpenChildren], StatusFinished, received), "started past the bound")
	assert.NotNil(t, c.SubagentStopped(children[0], StatusFinished, received))
}
