package runtrace

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func event(typ, id string, mod func(*aep.Event)) *aep.Event {
	ev := &aep.Event{ID: id, Type: typ, Source: "aep://h/agent/a/session/s", Run: "run:s:1"}
	if mod != nil {
		mod(ev)
	}
	return ev
}

func withCall(id string) func(*aep.Event) {
	return func(ev *aep.Event) { ev.Data = map[string]any{"tool": map[string]any{"name": "bash", "call_id": id}} }
}

func TestLocate(t *testing.T) {
	run, ok := Locate(event("run.started", "R", nil))
	require.True(t, ok)
	assert.Equal(t, KindRun, run.Kind)
	assert.Zero(t, run.ParentID)

	t.Run("every event of the run shares its trace", func(t *testing.T) {
		for _, typ := range []string{"run.finished", "state.delta", "error.raised", "x.openhands.message.event"} {
			pos, ok := Locate(event(typ, "E", nil))
			require.True(t, ok)
			assert.Equal(t, run, pos, typ)
		}
	})
	t.Run("a tool call is keyed by its call id", func(t *testing.T) {
		req, ok := Locate(event("tool.requested", "T1", withCall("call_1")))
		require.True(t, ok)
		done, _ := Locate(event("tool.completed", "T2", withCall("call_1")))
		assert.Equal(t, KindTool, req.Kind)
		assert.Equal(t, req, done)
		assert.Equal(t, run.TraceID, req.TraceID)
		assert.Equal(t, run.SpanID, req.ParentID)
		other, _ := Locate(event("tool.completed", "T3", withCall("call_2")))
		assert.NotEqual(t, req.SpanID, other.SpanID)
	})
	t.Run("without a call id, by the tool.requested id", func(t *testing.T) {
		req, _ := Locate(event("tool.requested", "T1", nil))
		done, ok := Locate(event("tool.failed", "T2", func(ev *aep.Event) { ev.Cause = "T1" }))
		require.True(t, ok)
		assert.Equal(t, req, done)
		_, ok = Locate(event("tool.failed", "T2", nil))
		assert.False(t, ok, "an answer naming no request has no span")
	})
	t.Run("an attention wait by its request id", func(t *testing.T) {
		req, _ := Locate(event("attention.requested", "A1", nil))
		res, ok := Locate(event("attention.resolved", "A2", func(ev *aep.Event) { ev.Subject, ev.Cause = "A1", "X" }))
		require.True(t, ok)
		assert.Equal(t, KindAttention, res.Kind)
		assert.Equal(t, req, res)
	})
	t.Run("events outside a run have no position", func(t *testing.T) {
		_, ok := Locate(event("session.started", "S", func(ev *aep.Event) { ev.Run = "" }))
		assert.False(t, ok)
	})
	t.Run("ids depend on source and run", func(t *testing.T) {
		other, _ := Locate(event("run.started", "R", func(ev *aep.Event) { ev.Source = "aep://h2/agent/a/session/s" }))
		assert.NotEqual(t, run.TraceID, other.TraceID)
		next, _ := Locate(event("run.started", "R", func(ev *aep.Event) { ev.Run = "run:s:2" }))
		assert.NotEqual(t, run.TraceID, next.TraceID)
	})
	t.Run("a generation's query on the source names the same run", func(t *testing.T) {
		gen, _ := Locate(event("run.started", "R", func(ev *aep.Event) { ev.Source += "?epoch=42" }))
		assert.Equal(t, run, gen)
	})
}

func TestTraceparent(t *testing.T) {
	pos, _ := Locate(event("run.started", "R", nil))
	assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, pos.Traceparent())
}

// TestIDsHashTheirText pins what the ids hash: "aep trace\n" or "aep span\n"
// before emitter, run and span key joined by newlines. Stored traces and a
// consumer built from another release rely on the same bytes.
func TestIDsHashTheirText(t *testing.T) {
	sum := func(text string) [32]byte { return sha256.Sum256([]byte(text)) }
	run := "aep://h/agent/a/session/s\nrun:s:1"
	wantTrace := sum("aep trace\n" + run)
	wantRun := sum("aep span\n" + run + "\nrun")
	for _, c := range []struct {
		name, key string
		ev        *aep.Event
	}{
		{"run", "", event("run.started", "R", func(ev *aep.Event) { ev.Source += "?epoch=2" })},
		{"tool by call id", "tool call c1", event("tool.requested", "T1", withCall("c1"))},
		{"tool by event", "tool event T2", event("tool.requested", "T2", nil)},
		{"attention", "attention A1", event("attention.requested", "A1", nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			pos, ok := Locate(c.ev)
			require.True(t, ok)
			assert.Equal(t, wantTrace[:16], pos.TraceID[:])
			if c.key == "" {
				assert.Equal(t, wantRun[:8], pos.SpanID[:])
				return
			}
			assert.Equal(t, wantRun[:8], pos.ParentID[:])
			want := sum("aep span\n" + run + "\n" + c.key)
			assert.Equal(t, want[:8], pos.SpanID[:])
		})
	}
}

func TestParseTraceparent(t *testing.T) {
	pos, ok := Locate(&aep.Event{Type: "run.started", Source: "aep://h/agent/a/session/s", Run: "run:s:1"})
	require.True(t, ok)
	for _, tc := range []struct {
		name, traceparent string
		ok                bool
	}{
		{"a located event's", pos.Traceparent(), true},
		{"empty", "", false},
		{"three parts", "00-" + strings.Repeat("a", 32) + "-" + strings.Repeat("b", 16), false},
		{"a short trace id", "00-" + strings.Repeat("a", 30) + "-" + strings.Repeat("b", 16) + "-01", false},
		{"not hex", "00-" + strings.Repeat("g", 32) + "-" + strings.Repeat("b", 16) + "-01", false},
		{"a zero trace id", "00-" + strings.Repeat("0", 32) + "-" + strings.Repeat("b", 16) + "-01", false},
		{"a zero span id", "00-" + strings.Repeat("a", 32) + "-" + strings.Repeat("0", 16) + "-01", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace, span, ok := ParseTraceparent(tc.traceparent)
			assert.Equal(t, tc.ok, ok)
			if tc.ok {
				assert.Equal(t, pos.TraceID, trace)
				assert.Equal(t, pos.SpanID, span)
			}
		})
	}
}
