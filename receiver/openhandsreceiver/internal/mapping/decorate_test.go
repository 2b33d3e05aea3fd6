package mapping

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
)

var decorateStart = time.Date(2026, 7, 12, 10, 0, 0, 0, time.UTC)

// at is a vendor timestamp ms milliseconds after decorateStart.
func at(ms int) string {
	return decorateStart.Add(time.Duration(ms) * time.Millisecond).Format("2006-01-02T15:04:05.000000")
}

// scriptEvent builds a vendor event of kind at ts.
func scriptEvent(tb testing.TB, kind, id, ts string, fields map[string]any) Event {
	tb.Helper()
	f := map[string]any{"kind": kind, "id": id, "timestamp": ts, "source": "environment"}
	for k, v := range fields {
		f[k] = v
	}
	return vendorEvent(tb, f)
}

func statusAt(tb testing.TB, id, ts, status string) Event {
	return scriptEvent(tb, "ConversationStateUpdateEvent", id, ts, map[string]any{"key": "execution_status", "value": status})
}

// statsAt is the server's stats update: accumulated figures of one usage id.
func statsAt(tb testing.TB, id, ts string, prompt, completion int, cost float64) Event {
	return scriptEvent(tb, "ConversationStateUpdateEvent", id, ts, map[string]any{"key": "stats", "value": map[string]any{
		"usage_to_metrics": map[string]any{"agent": map[string]any{
			"model_name": "fake", "accumulated_cost": cost,
			"accumulated_token_usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "cache_read_tokens": 7},
		}},
	}})
}

func actionAt(tb testing.TB, id, ts, callID string) Event {
	return scriptEvent(tb, "ActionEvent", id, ts, map[string]any{
		"source": "agent", "tool_name": "terminal", "tool_call_id": callID,
		"action": map[string]any{"kind": "TerminalAction", "command": "ls"},
	})
}

// respondedAt is an action the LLM response responseID asked for.
func respondedAt(tb testing.TB, id, ts, callID, responseID string) Event {
	ev := actionAt(tb, id, ts, callID)
	ev.Fields["llm_response_id"] = responseID
	return ev
}

// lateStatsScript is a run whose last response's stats update comes after
// the status that ends it, as the 1.58.2 server publishes them.
func lateStatsScript(tb testing.TB) []Event {
	return []Event{
		statusAt(tb, "s1", at(0), StatusRunning),
		respondedAt(tb, "a1", at(1000), "call_1", "resp-1"),
		statsAt(tb, "st1", at(1100), 100, 10, 0.001),
		observationAt(tb, "o1", at(1200), "call_1", "a1"),
		respondedAt(tb, "a2", at(2000), "call_2", "resp-2"),
		observationAt(tb, "o2", at(2100), "call_2", "a2"),
		statusAt(tb, "s2", at(2200), StatusFinished),
		statsAt(tb, "st2", at(2300), 250, 30, 0.0025),
	}
}

func observationAt(tb testing.TB, id, ts, callID, actionID string) Event {
	return scriptEvent(tb, "ObservationEvent", id, ts, map[string]any{
		"tool_name": "terminal", "tool_call_id": callID, "action_id": actionID,
		"observation": map[string]any{"kind": "TerminalObservation", "content": "ok", "is_error": false},
	})
}

// decorated maps and decorates each event in order, returning all outputs.
func decorated(tb testing.TB, c *Conversation, d *Decorator, evs ...Event) []*aep.Event {
	tb.Helper()
	var out []*aep.Event
	for _, ev := range evs {
		out = append(out, d.Decorate(ev, c.Map(ev, received))...)
	}
	return out
}

func only(tb testing.TB, evs []*aep.Event, typ string) []*aep.Event {
	tb.Helper()
	var out []*aep.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	require.NotEmpty(tb, out, "no %s in %v", typ, types(evs))
	return out
}

// decorationScript is two runs: tool calls answered by an observation and
// an agent error, an attention wait, stats growing across both runs, and a
// user rejection.
func decorationScript(tb testing.TB) []Event {
	return []Event{
		statusAt(tb, "s1", at(0), StatusRunning),
		statsAt(tb, "st1", at(1000), 100, 20, 0.01),
		actionAt(tb, "a1", at(2000), "call_1"),
		observationAt(tb, "o1", at(2500), "call_1", "a1"),
		actionAt(tb, "a2", at(3000), "call_2"),
		scriptEvent(tb, "AgentErrorEvent", "e2", at(3250), map[string]any{"source": "agent", "tool_name": "terminal", "tool_call_id": "call_2", "error": "boom"}),
		statusAt(tb, "s2", at(4000), StatusWaiting),
		statusAt(tb, "s3", at(10000), StatusRunning),
		statsAt(tb, "st2", at(11000), 250, 50, 0.03),
		statusAt(tb, "s4", at(12000), StatusFinished),
		statusAt(tb, "s5", at(20000), StatusRunning),
		statsAt(tb, "st3", at(21000), 400, 70, 0.05),
		actionAt(tb, "a3", at(22000), "call_1"),
		scriptEvent(tb, "UserRejectObservation", "r3", at(23000), map[string]any{"tool_name": "terminal", "tool_call_id": "call_1", "action_id": "a3", "rejection_source": "user"}),
		statusAt(tb, "s6", at(24000), StatusFinished),
	}
}

func TestDecorate(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	out := decorated(t, c, NewDecorator(&DecoratorState{}), decorationScript(t)...)
	requireValid(t, out)
	requireLifecycle(t, out)

	requested := only(t, out, "tool.requested")
	require.Len(t, requested, 3)
	completed := only(t, out, "tool.completed")[0]
	assert.Equal(t, requested[0].ID, completed.Cause)
	assert.Equal(t, json.Number("500"), completed.Data["duration_ms"])
	failed := only(t, out, "tool.failed")[0]
	assert.Equal(t, requested[1].ID, failed.Cause)
	assert.Equal(t, json.Number("250"), failed.Data["duration_ms"])
	reject := only(t, out, VendorType("UserRejectObservation"))[0]
	assert.Equal(t, requested[2].ID, reject.Cause, "a reused call id answers the latest request")

	resolved := only(t, out, typeAttentionResolved)[0]
	assert.Equal(t, json.Number("6000"), resolved.Data["latency_ms"])

	started := only(t, out, typeRunStarted)
	finished := only(t, out, typeRunFinished)
	require.Len(t, finished, 2)
	for i, want := range []struct {
		duration, input, output string
		cost                    json.Number
	}{
		{"12000", "250", "50", "0.03"},
		{"4000", "150", "20", "0.02"},
	} {
		f := finished[i]
		assert.Equal(t, started[i].ID, f.Cause)
		assert.Equal(t, json.Number(want.duration), f.Data["duration_ms"], "run %d", i+1)
		assert.Equal(t, json.Number(want.input), f.Data["gen_ai.usage.input_tokens"], "run %d", i+1)
		assert.Equal(t, json.Number(want.output), f.Data["gen_ai.usage.output_tokens"], "run %d", i+1)
		assert.Equal(t, map[string]any{"currency": "USD", "total": want.cost}, f.Data["cost"], "run %d", i+1)
	}

	// Every event between a run's start and its terminal is in the run.
	open := ""
	for _, ev := range out {
		if ev.Type == typeRunStarted {
			open = ev.Run
		}
		assert.Equal(t, open, ev.Run, "%s inside run %q", ev.Type, open)
		if ev.Type == typeRunFinished {
			open = ""
		}
	}

	for _, ev := range out {
		pos, inRun := runtrace.Locate(ev)
		if !inRun {
			assert.Empty(t, ev.Traceparent, ev.Type)
			continue
		}
		assert.Equal(t, pos.Traceparent(), ev.Traceparent, ev.Type)
	}
	reqPos, _ := runtrace.Locate(requested[0])
	donePos, _ := runtrace.Locate(completed)
	assert.Equal(t, reqPos, donePos, "request and answer share the tool span")
	assert.Equal(t, runtrace.KindTool, donePos.Kind)
}

// TestDecorateWaitsForTheRunsLastStats: run.finished waits for the stats
// update of its run's last response, and is released with the complete
// usage by that update, or by the run's closing snapshot; another event
// releases it without usage, and so does the conversation's end.
func TestDecorateWaitsForTheRunsLastStats(t *testing.T) {
	finishedAfter := func(t *testing.T, out []*aep.Event) *aep.Event {
		t.Helper()
		requireValid(t, out)
		requireLifecycle(t, out)
		f := only(t, out, typeRunFinished)[0]
		assert.Equal(t, json.Number("2200"), f.Data["duration_ms"])
		return f
	}
	t.Run("held until the stats update", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		d := NewDecorator(&DecoratorState{})
		script := lateStatsScript(t)
		before := decorated(t, c, d, script[:len(script)-1]...)
		assert.Nil(t, findType(before, typeRunFinished), "held at the status")
		out := append(before, decorated(t, c, d, script[len(script)-1])...)
		f := finishedAfter(t, out)
		assert.Equal(t, json.Number("250"), f.Data["gen_ai.usage.input_tokens"])
		assert.Equal(t, json.Number("30"), f.Data["gen_ai.usage.output_tokens"])
		assert.Equal(t, map[string]any{"currency": "USD", "total": json.Number("0.0025")}, f.Data["cost"])
	})
	t.Run("released by the closing snapshot", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		script := lateStatsScript(t)
		snapshot := scriptEvent(t, "ConversationStateUpdateEvent", "fs", at(2400), map[string]any{"key": "full_state", "value": map[string]any{
			"execution_status": StatusFinished, "stats": statsAt(t, "x", at(0), 250, 30, 0.0025).Fields["value"],
		}})
		out := decorated(t, c, NewDecorator(&DecoratorState{}), append(script[:len(script)-1], snapshot)...)
		f := finishedAfter(t, out)
		assert.Equal(t, json.Number("250"), f.Data["gen_ai.usage.input_tokens"])
		assert.Less(t, slices.Index(out, f), slices.Index(out, findType(out, "state.snapshot")), "before the snapshot's own output")
	})
	t.Run("released incomplete by another event", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		script := lateStatsScript(t)
		out := decorated(t, c, NewDecorator(&DecoratorState{}), append(script[:len(script)-1], message(t, "m", "user", "user"))...)
		f := finishedAfter(t, out)
		assert.NotContains(t, f.Data, "gen_ai.usage.input_tokens", "incomplete usage is not reported")
		assert.NotContains(t, f.Data, "cost")
	})
	t.Run("released by the end", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		d := NewDecorator(&DecoratorState{})
		script := lateStatsScript(t)
		out := decorated(t, c, d, script[:len(script)-1]...)
		out = append(out, d.Decorate(At(at(3000)), c.End(received, at(3000)))...)
		finishedAfter(t, out)
		assert.Equal(t, typeSessionEnded, out[len(out)-1].Type)
	})
	t.Run("not held for a server not seen publishing stats updates", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		snapshot := scriptEvent(t, "ConversationStateUpdateEvent", "fs", at(0), map[string]any{"key": "full_state", "value": map[string]any{
			"stats": map[string]any{"usage_to_metrics": map[string]any{}},
		}})
		script := append([]Event{snapshot}, lateStatsScript(t)...)
		script = slices.DeleteFunc(script, func(ev Event) bool { return str(ev.Fields, "key") == "stats" })
		out := decorated(t, c, NewDecorator(&DecoratorState{}), script...)
		f := finishedAfter(t, out)
		assert.Equal(t, typeRunFinished, out[len(out)-1].Type, "emitted with its status")
		assert.NotContains(t, f.Data, "gen_ai.usage.input_tokens", "two responses, no stats update: incomplete")
	})
	t.Run("not held when the usage is complete", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		script := lateStatsScript(t)
		// The last stats update comes before the status this time.
		script[len(script)-2], script[len(script)-1] = script[len(script)-1], script[len(script)-2]
		out := decorated(t, c, NewDecorator(&DecoratorState{}), script...)
		f := finishedAfter(t, out)
		assert.Equal(t, typeRunFinished, out[len(out)-1].Type, "emitted with its status")
		assert.Equal(t, json.Number("250"), f.Data["gen_ai.usage.input_tokens"])
	})
}

// TestDecorateSurvivesRestart: a decorator restored from the persisted
// state of another decorates the rest of the stream exactly as the first
// would have, a held run.finished included.
func TestDecorateSurvivesRestart(t *testing.T) {
	for name, script := range map[string][]Event{"two runs": decorationScript(t), "late stats": lateStatsScript(t)} {
		t.Run(name, func(t *testing.T) { requireRestartable(t, script) })
	}
}

func requireRestartable(t *testing.T, script []Event) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	whole := decorated(t, c, NewDecorator(&DecoratorState{}), script...)

	for cut := 1; cut < len(script); cut++ {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		var firstState DecoratorState
		out := decorated(t, c, NewDecorator(&firstState), script[:cut]...)
		raw, err := json.Marshal(firstState)
		require.NoError(t, err)
		var state DecoratorState
		require.NoError(t, json.Unmarshal(raw, &state))
		out = append(out, decorated(t, c, NewDecorator(&state), script[cut:]...)...)
		require.Equal(t, len(whole), len(out))
		for i := range whole {
			assert.Equal(t, marshal(t, whole[i]), marshal(t, out[i]), "cut %d event %d", cut, i)
		}
	}
}

// TestDecorateNeverInvents: without stats no usage or cost; without the
// run's start no duration; at capture none only the envelope attributes.
func TestDecorateNeverInvents(t *testing.T) {
	t.Run("no stats", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		out := decorated(t, c, NewDecorator(&DecoratorState{}),
			statusAt(t, "s1", at(0), StatusRunning), statusAt(t, "s2", at(1500), StatusFinished))
		f := only(t, out, typeRunFinished)[0]
		assert.Equal(t, json.Number("1500"), f.Data["duration_ms"])
		assert.NotContains(t, f.Data, "gen_ai.usage.input_tokens")
		assert.NotContains(t, f.Data, "cost")
	})
	t.Run("stats without cost", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		noCost := statsAt(t, "st", at(500), 10, 2, 0)
		delete(noCost.Fields["value"].(map[string]any)["usage_to_metrics"].(map[string]any)["agent"].(map[string]any), "accumulated_cost")
		out := decorated(t, c, NewDecorator(&DecoratorState{}),
			statusAt(t, "s1", at(0), StatusRunning), noCost, statusAt(t, "s2", at(1500), StatusFinished))
		f := only(t, out, typeRunFinished)[0]
		assert.Equal(t, json.Number("10"), f.Data["gen_ai.usage.input_tokens"])
		assert.NotContains(t, f.Data, "cost")
	})
	t.Run("run start not seen", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		c.Map(statusAt(t, "s1", at(0), StatusRunning), received) // mapped, never decorated
		out := decorated(t, c, NewDecorator(&DecoratorState{}), statusAt(t, "s2", at(1500), StatusFinished))
		f := only(t, out, typeRunFinished)[0]
		assert.NotContains(t, f.Data, "duration_ms")
		assert.NotEmpty(t, f.Traceparent)
	})
	t.Run("failed and cancelled runs carry no usage", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		out := decorated(t, c, NewDecorator(&DecoratorState{}), statusAt(t, "s1", at(0), StatusRunning),
			statsAt(t, "st", at(500), 10, 2, 0.5), statusAt(t, "s2", at(1500), StatusError))
		f := only(t, out, typeRunFailed)[0]
		assert.Equal(t, json.Number("1500"), f.Data["duration_ms"])
		assert.NotContains(t, f.Data, "cost", "run.failed's schema has no cost")
	})
	t.Run("capture none", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureNone, false))
		out := decorated(t, c, NewDecorator(&DecoratorState{}), decorationScript(t)...)
		requireValid(t, out)
		completed := only(t, out, "tool.completed")[0]
		assert.Nil(t, completed.Data)
		assert.Equal(t, only(t, out, "tool.requested")[0].ID, completed.Cause)
		assert.NotEmpty(t, completed.Traceparent)
	})
}

// TestDecorateEnd: a conversation that disappears cancels its open run with
// the run's duration to the last vendor timestamp seen.
func TestDecorateEnd(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	d := NewDecorator(&DecoratorState{})
	decorated(t, c, d, statusAt(t, "s1", at(0), StatusRunning))
	out := d.Decorate(At(at(2000)), c.End(received, at(2000)))
	cancelled := only(t, out, typeRunCancelled)[0]
	assert.Equal(t, json.Number("2000"), cancelled.Data["duration_ms"])
	assert.NotEmpty(t, cancelled.Traceparent)
	assert.Empty(t, only(t, out, typeSessionEnded)[0].Traceparent)
}

// TestDecorateBoundsOpenToolCalls: unanswered calls are forgotten oldest
// first past the bound.
func TestDecorateBoundsOpenToolCalls(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	d := NewDecorator(&DecoratorState{})
	evs := []Event{statusAt(t, "s1", at(0), StatusRunning)}
	for i := range maxOpenToolCalls + 1 {
		id := "a" + string(rune('0'+i%10)) + "-" + time.Duration(i).String()
		evs = append(evs, actionAt(t, id, at(i+1), "call-"+id))
	}
	decorated(t, c, d, evs...)
	assert.Len(t, d.s.Tools, maxOpenToolCalls)
	assert.NotContains(t, d.s.Tools, "call call-"+evs[1].ID(), "the oldest is forgotten")
}

// TestToolKey: a tool call is named by its tool_call_id, else by its
// action's event id, and the name an answer looks up is the one its call
// was stored under.
func TestToolKey(t *testing.T) {
	for _, c := range []struct {
		fields   map[string]any
		actionID string
		want     string
	}{
		{map[string]any{"tool_call_id": "call_1"}, "a1", "call call_1"},
		{map[string]any{"tool_call_id": ""}, "a1", "action a1"},
		{map[string]any{}, "a1", "action a1"},
		{map[string]any{}, "", ""},
	} {
		assert.Equal(t, c.want, toolKey(c.fields, c.actionID))
		assert.Equal(t, c.want, string(appendToolKey([]byte("x"), c.fields, c.actionID))[1:])
	}
	d := NewDecorator(&DecoratorState{})
	d.requested(toolKey(map[string]any{}, "a1"), "req-1", at(0))
	completed := &aep.Event{Type: "tool.completed", Data: map[string]any{}}
	d.answered(completed, appendToolKey(nil, map[string]any{}, "a1"), decorateStart.Add(time.Second), true)
	assert.Equal(t, "req-1", completed.Cause)
	assert.Equal(t, json.Number("1000"), completed.Data["duration_ms"])
	assert.Empty(t, d.s.Tools, "the answered call is forgotten")
}
