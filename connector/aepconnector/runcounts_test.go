package aepconnector

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// TestRunCounts: a run reports its distinct tool calls and steps only when
// its start was seen, and none at all past maxCounted.
func TestRunCounts(t *testing.T) {
	at := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	runEvent := func(typ string) *aep.Event {
		ev := toolEvent(typ, "r", "", at)
		ev.Data = map[string]any{}
		return ev
	}
	finish := func(tr *tracker) *operation {
		ops := tr.observe(runEvent("run.finished"), at.Add(time.Minute))
		require.NotEmpty(t, ops)
		return ops[len(ops)-1]
	}
	for _, tc := range []struct {
		name       string
		started    bool
		calls      int
		wantCounts bool
	}{
		{"start seen", true, 3, true},
		{"joined midway", false, 3, false},
		{"past the bound", true, maxCounted + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(createDefaultConfig().(*Config).OpenSpans, func(string) {})
			tr.countCalls = true
			if tc.started {
				tr.observe(runEvent("run.started"), at)
			}
			for i := range tc.calls {
				ev := toolEvent("tool.requested", "r", fmt.Sprint(i), at)
				ev.Step = fmt.Sprint("step-", i/2)
				tr.observe(ev, at)
			}
			op := finish(tr)
			tools, ok := op.calls.toolCalls()
			assert.Equal(t, tc.wantCounts, ok)
			inferences, ok := op.calls.inferenceCalls()
			assert.Equal(t, tc.wantCounts, ok)
			if tc.wantCounts {
				assert.Equal(t, tc.calls, tools)
				assert.Equal(t, (tc.calls+1)/2, inferences)
			}
		})
	}
}

// TestRunCountsOnlyWhereReported: only a metrics connector opted in to the
// latest conventions reports call counts, so only it keeps them; the
// traces connector and one not opted in spend nothing on them.
func TestRunCountsOnlyWhereReported(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		counted   bool
	}{
		{"not opted in", "", false},
		{"opted in", semconvGenAILatest, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(semconvOptInEnv, tc.env)
			h := newHarness(t, nil)
			h.feed(t, runWithCalls()[:2]...) // run.started, a tool call
			counts := func(c *core) bool {
				for e := c.tracker.order.Front(); e != nil; e = e.Next() {
					if e.Value.(*openStart).calls != nil {
						return true
					}
				}
				return false
			}
			assert.False(t, counts(h.traces.(*tracesConnector).core), "traces")
			assert.Equal(t, tc.counted, counts(h.metrics.(*metricsConnector).core), "metrics")
		})
	}
}
