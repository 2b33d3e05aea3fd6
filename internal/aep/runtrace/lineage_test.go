package runtrace

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

const (
	parentSource = "aep://h:8000/agent/openhands/session/p-1"
	childSource  = "aep://h:8000/agent/openhands/session/c-1"
)

func TestDelegator(t *testing.T) {
	call, ok := Locate(&aep.Event{Type: "tool.requested", Source: parentSource, Run: "run:p-1:1",
		Data: map[string]any{"tool": map[string]any{"name": "start_child_conversation", "call_id": "call-7"}}})
	require.True(t, ok)
	run, ok := Locate(&aep.Event{Type: "run.started", Source: parentSource, Run: "run:p-1:1"})
	require.True(t, ok)
	for _, tc := range []struct {
		name string
		ev   *aep.Event
		want Position
		ok   bool
	}{
		{"the delegating tool call", &aep.Event{Type: "delegation.subagent.started", Source: parentSource + "?epoch=3", Run: "run:p-1:1",
			Data: map[string]any{"tool": map[string]any{"name": "start_child_conversation", "call_id": "call-7"}}}, call, true},
		{"no call named: the run", &aep.Event{Type: "delegation.subagent.started", Source: parentSource, Run: "run:p-1:1",
			Data: map[string]any{"child": map[string]any{"session": "c-1"}}}, run, true},
		{"an empty call id: the run", &aep.Event{Type: "delegation.subagent.started", Source: parentSource, Run: "run:p-1:1",
			Data: map[string]any{"tool": map[string]any{"name": "start_child_conversation", "call_id": ""}}}, run, true},
		{"no run", &aep.Event{Type: "delegation.subagent.started", Source: parentSource}, Position{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Delegator(tc.ev)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParentRun(t *testing.T) {
	parentRun := func(source string) Position {
		pos, ok := Locate(&aep.Event{Type: "run.started", Source: source, Run: "run:p-1:2"})
		require.True(t, ok)
		return pos
	}
	started := func(source string, parent map[string]any) *aep.Event {
		return &aep.Event{Type: "session.started", Source: source, Session: "c-1", Data: map[string]any{"parent": parent}}
	}
	for _, tc := range []struct {
		name string
		ev   *aep.Event
		want Position
		ok   bool
	}{
		{"a session-scoped source names the parent's session", started(childSource+"?epoch=2",
			map[string]any{"session": "p-1", "run": "run:p-1:2"}), parentRun(parentSource), true},
		{"any other source is the parent's too", started("aep://h/agent/x",
			map[string]any{"session": "p-1", "run": "run:p-1:2"}), parentRun("aep://h/agent/x"), true},
		{"no parent run", started(childSource, map[string]any{"session": "p-1"}), Position{}, false},
		{"no parent session", started(childSource, map[string]any{"run": "run:p-1:2"}), Position{}, false},
		{"no parent", &aep.Event{Type: "session.started", Source: childSource, Session: "c-1"}, Position{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParentRun(tc.ev)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}
