package policy

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

var t0 = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)

// step is one event arriving at t0+after, or a tick when typ is "tick".
type step struct {
	after time.Duration
	typ   string
	data  map[string]any
}

// want is one breach, by policy, level and cause (the step's index; -1
// for a tick, whose cause is the last event before it).
type want struct {
	policy string
	level  Level
	cause  int
}

func ev(i int, typ string, at time.Time, data map[string]any) *aep.Event {
	return &aep.Event{
		AEP: aep.Version, ID: fmt.Sprintf("e%d", i), Type: typ, Time: at.Format(time.RFC3339Nano),
		Source: "aep://h/agent/openhands/session/s1", Agent: "openhands", Session: "s1", Data: data,
	}
}

func num(v float64) json.Number { return json.Number(fmt.Sprint(v)) }

func finished(in, out int, cost float64) map[string]any {
	d := map[string]any{usage.AttrInputTokens: num(float64(in)), usage.AttrOutputTokens: num(float64(out))}
	if cost >= 0 {
		d["cost"] = map[string]any{"currency": "USD", "total": num(cost)}
	}
	return d
}

func toolReq(name, callID, digest string) map[string]any {
	d := map[string]any{"tool": map[string]any{"name": name, "call_id": callID}}
	if digest != "" {
		d["args_digest"] = digest
	}
	return d
}

func toolFailed(name, errType string) map[string]any {
	return map[string]any{"tool": map[string]any{"name": name}, "error": map[string]any{"type": errType}}
}

func run(t *testing.T, rules Rules, prices usage.Prices, steps []step) []Breach {
	t.Helper()
	e := New(&Policies{Default: rules, Prices: prices}, func() int64 { return 7 }, 100)
	var got []Breach
	for i, s := range steps {
		at := t0.Add(s.after)
		if s.typ == "tick" {
			got = append(got, e.Tick(at)...)
			continue
		}
		got = append(got, e.Observe(ev(i, s.typ, at, s.data), at)...)
	}
	return got
}

func TestPolicies(t *testing.T) {
	budget := Rules{Session: Budget{CostUSD: Limit{Soft: 1, Hard: 2}, Tokens: Limit{Hard: 1000}}}
	loops := Rules{RepeatedTool: 3, RepeatWindow: time.Minute, RepeatedError: 3}
	stuck := Rules{StuckAfter: time.Minute, LongRunningTools: []string{"make"}}
	tests := []struct {
		name   string
		rules  Rules
		prices usage.Prices
		steps  []step
		want   []want
	}{
		{
			name:  "cost crosses soft then hard, once each",
			rules: budget,
			steps: []step{
				{0, "run.started", nil}, {1, "run.finished", finished(10, 10, 0.6)},
				{2, "run.started", nil}, {3, "run.finished", finished(10, 10, 0.6)},
				{4, "run.started", nil}, {5, "run.finished", finished(10, 10, 0.6)},
				{6, "run.started", nil}, {7, "run.finished", finished(10, 10, 0.6)},
			},
			want: []want{{BudgetSessionCost, Soft, 3}, {BudgetSessionCost, Hard, 7}},
		},
		{
			name:  "a jump past both thresholds fires hard alone",
			rules: budget,
			steps: []step{{0, "run.finished", finished(1, 1, 5)}, {1, "run.finished", finished(1, 1, 5)}},
			want:  []want{{BudgetSessionCost, Hard, 0}},
		},
		{
			name:   "model calls without cost are priced; tokens sum input and output",
			rules:  budget,
			prices: usage.Prices{"m": {Input: 1e6, Output: 0}}, // a dollar a token
			steps: []step{
				{0, "x.codex.otel.sse_event", map[string]any{usage.AttrOperationName: "chat", usage.AttrRequestModel: "m",
					usage.AttrInputTokens: num(1), usage.AttrOutputTokens: num(999)}},
			},
			want: []want{{BudgetSessionCost, Soft, 0}, {BudgetSessionTokens, Hard, 0}},
		},
		{
			name:  "a cost in another currency is not summed",
			rules: budget,
			steps: []step{{0, "run.finished", map[string]any{"cost": map[string]any{"currency": "EUR", "total": num(9)}}}},
		},
		{
			name:  "same tool and digest three times in the window is a loop, once",
			rules: loops,
			steps: []step{
				{0, "tool.requested", toolReq("bash", "c1", "d1")},
				{1 * time.Second, "tool.requested", toolReq("bash", "c2", "d1")},
				{2 * time.Second, "tool.requested", toolReq("bash", "c3", "d2")},
				{3 * time.Second, "tool.requested", toolReq("bash", "c4", "d1")},
				{4 * time.Second, "tool.requested", toolReq("bash", "c5", "d1")},
			},
			want: []want{{LoopTool, Hard, 3}},
		},
		{
			name:  "repeats spread wider than the window are no loop",
			rules: loops,
			steps: []step{
				{0, "tool.requested", toolReq("bash", "c1", "d1")},
				{40 * time.Second, "tool.requested", toolReq("bash", "c2", "d1")},
				{80 * time.Second, "tool.requested", toolReq("bash", "c3", "d1")},
			},
		},
		{
			name:  "a loop that broke fires again when it returns",
			rules: loops,
			steps: []step{
				{0, "tool.requested", toolReq("bash", "c1", "d1")},
				{1 * time.Second, "tool.requested", toolReq("bash", "c2", "d1")},
				{2 * time.Second, "tool.requested", toolReq("bash", "c3", "d1")},
				{5 * time.Minute, "tool.requested", toolReq("bash", "c4", "d1")},
				{5*time.Minute + 1*time.Second, "tool.requested", toolReq("bash", "c5", "d1")},
				{5*time.Minute + 2*time.Second, "tool.requested", toolReq("bash", "c6", "d1")},
			},
			want: []want{{LoopTool, Hard, 2}, {LoopTool, Hard, 5}},
		},
		{
			name:  "a request without a digest is not judged",
			rules: loops,
			steps: []step{
				{0, "tool.requested", toolReq("bash", "c1", "")},
				{1, "tool.requested", toolReq("bash", "c2", "")},
				{2, "tool.requested", toolReq("bash", "c3", "")},
			},
		},
		{
			name:  "the same error three times in a row, requests between",
			rules: loops,
			steps: []step{
				{0, "tool.requested", toolReq("bash", "c1", "")}, {1, "tool.failed", toolFailed("bash", "Timeout")},
				{2, "tool.requested", toolReq("bash", "c2", "")}, {3, "tool.failed", toolFailed("bash", "Timeout")},
				{4, "tool.requested", toolReq("bash", "c3", "")}, {5, "tool.failed", toolFailed("bash", "Timeout")},
				{6, "tool.failed", toolFailed("bash", "Timeout")},
			},
			want: []want{{LoopError, Hard, 5}},
		},
		{
			name:  "a success or another error breaks the streak",
			rules: loops,
			steps: []step{
				{0, "tool.failed", toolFailed("bash", "Timeout")}, {1, "tool.failed", toolFailed("bash", "Timeout")},
				{2, "tool.completed", nil},
				{3, "tool.failed", toolFailed("bash", "Timeout")}, {4, "tool.failed", toolFailed("bash", "Exit")},
				{5, "tool.failed", toolFailed("bash", "Timeout")},
			},
		},
		{
			name:  "a running run quiet past the limit is stuck, once per silence",
			rules: stuck,
			steps: []step{
				{0, "run.started", nil}, {59 * time.Second, "tick", nil}, {60 * time.Second, "tick", nil},
				{90 * time.Second, "tick", nil},
				{100 * time.Second, "progress.status", nil}, {161 * time.Second, "tick", nil},
			},
			want: []want{{StuckIdle, Soft, 0}, {StuckIdle, Soft, 4}},
		},
		{
			name:  "an idle session is never stuck",
			rules: stuck,
			steps: []step{{0, "run.started", nil}, {1, "run.finished", nil}, {time.Hour, "tick", nil}},
		},
		{
			name:  "an open long-running tool call holds the stuck rule off until it ends",
			rules: stuck,
			steps: []step{
				{0, "run.started", nil}, {1, "tool.requested", toolReq("make", "c1", "")}, {time.Hour, "tick", nil},
				{time.Hour + 1, "tool.completed", toolReq("make", "c1", "")}, {2 * time.Hour, "tick", nil},
			},
			want: []want{{StuckIdle, Soft, 3}},
		},
		{
			name:  "another tool call open is no excuse",
			rules: stuck,
			steps: []step{{0, "run.started", nil}, {1, "tool.requested", toolReq("bash", "c1", "")}, {time.Hour, "tick", nil}},
			want:  []want{{StuckIdle, Soft, 1}},
		},
		{
			name:  "long-running calls have their own limit when set",
			rules: Rules{StuckAfter: time.Minute, LongRunningTools: []string{"make"}, LongRunningAfter: 30 * time.Minute},
			steps: []step{
				{0, "run.started", nil}, {1, "tool.requested", toolReq("make", "c1", "")},
				{29 * time.Minute, "tick", nil}, {31 * time.Minute, "tick", nil},
			},
			want: []want{{StuckIdle, Soft, 1}},
		},
		{
			name:  "the server's own stuck status",
			rules: Rules{},
			steps: []step{{0, "run.started", nil}, {1, "run.failed", map[string]any{"reason": "stuck"}}},
			want:  []want{{StuckServer, Soft, 1}},
		},
		{
			name:  "wall time of an open run crosses on a tick",
			rules: Rules{Session: Budget{WallTimeSeconds: Limit{Hard: 600}}},
			steps: []step{{0, "run.started", nil}, {9 * time.Minute, "tick", nil}, {11 * time.Minute, "tick", nil}, {12 * time.Minute, "tick", nil}},
			want:  []want{{BudgetSessionWallTime, Hard, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, tt.rules, tt.prices, tt.steps)
			var gotWant []want
			for _, b := range got {
				var cause int
				_, err := fmt.Sscanf(b.Cause, "e%d", &cause)
				require.NoError(t, err, b.Cause)
				gotWant = append(gotWant, want{b.Policy, b.Level, cause})
			}
			assert.Equal(t, tt.want, gotWant)
			for i, b := range got {
				assert.Equal(t, int64(7), b.Epoch)
				assert.Equal(t, int64(i), b.Seq, "breaches take consecutive positions")
			}
		})
	}
}
