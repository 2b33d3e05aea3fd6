package runtrace

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestLocateWithoutRun(t *testing.T) {
	noRun := func(ev *aep.Event) *aep.Event { ev.Run = ""; return ev }
	call := func(typ, id, callID string) *aep.Event { return noRun(event(typ, id, withCall(callID))) }

	t.Run("a call is the root of its own trace, its answers in it", func(t *testing.T) {
		req, ok := LocateWithoutRun(call("tool.requested", "T1", "call_1"))
		require.True(t, ok)
		assert.Equal(t, KindTool, req.Kind)
		assert.Zero(t, req.ParentID)
		done, ok := LocateWithoutRun(call("tool.completed", "T2", "call_1"))
		require.True(t, ok)
		assert.Equal(t, req, done)
		other, _ := LocateWithoutRun(call("tool.completed", "T3", "call_2"))
		assert.NotEqual(t, req.TraceID, other.TraceID, "one trace per call")
	})
	t.Run("an answer naming no request is a span of its own", func(t *testing.T) {
		a, ok := LocateWithoutRun(noRun(event("tool.completed", "T4", nil)))
		require.True(t, ok)
		b, _ := LocateWithoutRun(noRun(event("tool.completed", "T5", nil)))
		assert.NotEqual(t, a, b)
	})
	t.Run("the answer to a request without a call id finds it by cause", func(t *testing.T) {
		req, _ := LocateWithoutRun(noRun(event("tool.requested", "T6", nil)))
		done, _ := LocateWithoutRun(noRun(event("tool.denied", "T7", func(ev *aep.Event) { ev.Cause = "T6" })))
		assert.Equal(t, req, done)
	})
	t.Run("a wait and its answer by subject", func(t *testing.T) {
		req, ok := LocateWithoutRun(noRun(event("attention.requested", "A1", nil)))
		require.True(t, ok)
		assert.Equal(t, KindAttention, req.Kind)
		ans, _ := LocateWithoutRun(noRun(event("attention.resolved", "A2", func(ev *aep.Event) { ev.Subject = "A1" })))
		assert.Equal(t, req, ans)
	})
	t.Run("never a run's trace", func(t *testing.T) {
		inRun, _ := Locate(event("tool.requested", "T1", withCall("call_1")))
		alone, _ := LocateWithoutRun(call("tool.requested", "T1", "call_1"))
		assert.NotEqual(t, inRun.TraceID, alone.TraceID)
	})
	t.Run("events of a run and other types are not placed here", func(t *testing.T) {
		for _, ev := range []*aep.Event{event("tool.requested", "T1", withCall("c")), noRun(event("session.started", "S", nil)), noRun(event("error.raised", "E", nil))} {
			_, ok := LocateWithoutRun(ev)
			assert.False(t, ok, ev.Type)
		}
	})
}
