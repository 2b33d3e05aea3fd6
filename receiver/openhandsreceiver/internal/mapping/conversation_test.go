package mapping

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

const vendorTS = "2026-07-12T10:15:00.123456"

func action(tb testing.TB, id, callID string) Event {
	tb.Helper()
	return vendorEvent(tb, map[string]any{
		"kind": "ActionEvent", "id": id, "timestamp": vendorTS, "source": "agent",
		"thought": []any{}, "action": map[string]any{"kind": "TerminalAction", "command": "pip install x"},
		"tool_name": "terminal", "tool_call_id": callID, "llm_response_id": "resp-" + id,
		"security_risk": "HIGH",
	})
}

func observation(tb testing.TB, id, callID string) Event {
	tb.Helper()
	return vendorEvent(tb, map[string]any{
		"kind": "ObservationEvent", "id": id, "timestamp": vendorTS, "source": "environment",
		"tool_name": "terminal", "tool_call_id": callID, "action_id": "a",
		"observation": map[string]any{"kind": "TerminalObservation", "content": "ok", "is_error": false},
	})
}

func message(tb testing.TB, id, source, role string) Event {
	tb.Helper()
	return vendorEvent(tb, map[string]any{
		"kind": "MessageEvent", "id": id, "timestamp": vendorTS, "source": source,
		"llm_message": map[string]any{"role": role, "content": []any{map[string]any{"type": "text", "text": "hi"}}},
	})
}

func userReject(tb testing.TB, id, callID, by string) Event {
	tb.Helper()
	return vendorEvent(tb, map[string]any{
		"kind": "UserRejectObservation", "id": id, "timestamp": vendorTS, "source": "user",
		"tool_name": "terminal", "tool_call_id": callID, "action_id": "a",
		"rejection_reason": "no", "rejection_source": by,
	})
}

func fullState(tb testing.TB, id, status string) Event {
	tb.Helper()
	return vendorEvent(tb, map[string]any{
		"kind": "ConversationStateUpdateEvent", "id": id, "timestamp": vendorTS, "source": "environment",
		"key": "full_state", "value": map[string]any{"execution_status": status, "max_iterations": 500},
	})
}

func findType(evs []*aep.Event, typ string) *aep.Event {
	for _, ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	return nil
}

func TestNewConversationValidates(t *testing.T) {
	valid := testConfig(aep.CaptureMetadata, true)
	for _, tc := range []struct {
		name   string
		change func(*Config)
	}{
		{"missing_conversation_id", func(c *Config) { c.ConversationID = "" }},
		{"missing_source_and_host", func(c *Config) { c.ServerHost = "" }},
		{"unknown_default_level", func(c *Config) { c.Ceiling.Default = "secret" }},
		{"unknown_category_level", func(c *Config) { c.Ceiling.Categories = map[string]aep.Capture{"tool": "most"} }},
		{"empty_category", func(c *Config) { c.Ceiling.Categories = map[string]aep.Capture{"": aep.CaptureFull} }},
		{"redacted_without_redactor", func(c *Config) {
			c.Ceiling.Categories = map[string]aep.Capture{"attention": aep.CaptureRedacted}
			c.Redactor = nil
		}},
		{"redacted_deltas_without_stream_redactor", func(c *Config) {
			c.Ceiling.Default = aep.CaptureRedacted
			c.NewStreamRedactor = nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid
			tc.change(&cfg)
			_, err := NewConversation(cfg, nil)
			require.Error(t, err)
		})
	}
	t.Run("defaults", func(t *testing.T) {
		cfg := valid
		cfg.Redactor, cfg.NewStreamRedactor = nil, nil
		c := newConversation(t, cfg)
		assert.Equal(t, "aep://127.0.0.1:8000/agent/openhands/session/conv-1", c.Source())
		assert.Equal(t, DefaultAgent, c.cfg.Agent)
	})
	t.Run("explicit_source_and_agent", func(t *testing.T) {
		cfg := valid
		cfg.Source, cfg.Agent, cfg.ServerHost = "aep://relay-side/agent/oh", "oh", ""
		c := newConversation(t, cfg)
		assert.Equal(t, "aep://relay-side/agent/oh", c.Source())
		assert.Equal(t, "oh", c.Map(message(t, "m", "user", "user"), received)[0].Agent)
	})
	t.Run("full_needs_no_redactor", func(t *testing.T) {
		cfg := valid
		cfg.Ceiling.Default = aep.CaptureFull
		cfg.Redactor, cfg.NewStreamRedactor = nil, nil
		_, err := NewConversation(cfg, nil)
		require.NoError(t, err)
	})
}

func TestCapturePolicyFor(t *testing.T) {
	p := CapturePolicy{Categories: map[string]aep.Capture{"attention": aep.CaptureRedacted, "x": aep.CaptureNone}}
	assert.Equal(t, aep.CaptureMetadata, p.For("tool.requested"))
	assert.Equal(t, aep.CaptureRedacted, p.For("attention.requested"))
	assert.Equal(t, aep.CaptureNone, p.For("x.openhands.message.event"))
	p.Default = aep.CaptureFull
	assert.Equal(t, aep.CaptureFull, p.For("run.started"))
}

func TestStart(t *testing.T) {
	created := time.Date(2026, 7, 12, 9, 0, 0, 0, time.UTC)
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	ev := c.Start(created, received)
	requireValid(t, []*aep.Event{ev})
	assert.Equal(t, typeSessionStarted, ev.Type)
	assert.Equal(t, map[string]any{"client": map[string]any{"name": "openhands-agent-server"}, "server": testHost}, ev.Data)
	assert.Equal(t, "2026-07-12T10:15:01.500Z", ev.Time)
	assert.Equal(t, aep.SeverityInfo, ev.Severity)
	assert.Empty(t, ev.Run)

	again := newConversation(t, testConfig(aep.CaptureMetadata, false)).Start(created, received.Add(time.Hour))
	assert.Equal(t, ev.ID, again.ID, "the id follows the creation time, not the receive time")
	other := newConversation(t, testConfig(aep.CaptureMetadata, false)).Start(created.Add(time.Second), received)
	assert.NotEqual(t, ev.ID, other.ID)

	ended := feed(t, c, stateEvent(t, "s1", StatusDeleting))
	assert.Equal(t, ev.ID, findType(ended, typeSessionEnded).Cause)
	assert.Nil(t, c.Start(created, received), "no session.started after session.ended")
}

func TestEnvelope(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	out := feed(t, c,
		stateEvent(t, "s1", StatusRunning),
		action(t, "a1", "call-1"),
		stateEvent(t, "s2", StatusWaiting),
		userReject(t, "r1", "call-1", "hook"),
		observation(t, "o1", "call-1"),
		vendorEvent(t, map[string]any{"kind": "AgentErrorEvent", "id": "e1", "timestamp": vendorTS, "source": "agent",
			"tool_name": "terminal", "tool_call_id": "call-1", "error": "boom"}),
		message(t, "m1", "agent", "assistant"),
		stateEvent(t, "s3", StatusError),
		stateEvent(t, "s4", StatusRunning),
		stateEvent(t, "s5", StatusDeleting),
	)
	requireValid(t, out)
	requireLifecycle(t, out)
	severities := map[string]aep.Severity{
		"run.started": "info", "state.delta": "info", "tool.requested": "info", "attention.requested": "notice",
		"tool.denied": "warning", "tool.completed": "info", "tool.failed": "error",
		"x.openhands.message.event": "debug", "run.failed": "error", "attention.resolved": "info",
		"run.cancelled": "notice", "session.ended": "info",
	}
	for i, ev := range out {
		assert.Equal(t, aep.Version, ev.AEP)
		assert.Equal(t, "aep://127.0.0.1:8000/agent/openhands/session/conv-1", ev.Source)
		assert.Equal(t, DefaultAgent, ev.Agent)
		assert.Equal(t, testConversation, ev.Session)
		assert.Equal(t, "2026-07-12T10:15:01.500Z", ev.Time)
		assert.Nil(t, ev.Seq, "seq is the receiver's")
		assert.Nil(t, ev.Epoch, "epoch is the receiver's")
		assert.Equal(t, aep.CaptureMetadata, ev.Capture)
		want, ok := severities[ev.Type]
		require.True(t, ok, "event %d: unexpected type %s", i, ev.Type)
		assert.Equal(t, want, ev.Severity, "severity of %s", ev.Type)
		assert.NotEmpty(t, ev.Data["vendor_ts"], "event %d %s", i, ev.Type)
		assert.NotEmpty(t, ev.Data["vendor_event_id"], "event %d %s", i, ev.Type)
	}
}

func TestApprovalLoop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events func(t *testing.T) []Event
		want   []string
	}{
		{
			name: "approved",
			events: func(t *testing.T) []Event {
				return []Event{
					message(t, "m1", "user", "user"),
					stateEvent(t, "s1", StatusRunning),
					action(t, "a1", "call-1"),
					stateEvent(t, "s2", StatusWaiting),
					stateEvent(t, "s3", StatusRunning),
					observation(t, "o1", "call-1"),
					message(t, "m2", "agent", "assistant"),
					stateEvent(t, "s4", StatusFinished),
					fullState(t, "f1", StatusFinished),
				}
			},
			want: []string{
				"x.openhands.message.event",
				"run.started", "state.delta",
				"tool.requested",
				"state.delta", "attention.requested",
				"state.delta", "attention.resolved",
				"tool.completed",
				"x.openhands.message.event",
				"state.delta", "run.finished",
				"state.snapshot",
			},
		},
		{
			name: "rejected_by_user_then_new_run",
			events: func(t *testing.T) []Event {
				return []Event{
					stateEvent(t, "s1", StatusRunning),
					action(t, "a1", "call-1"),
					stateEvent(t, "s2", StatusWaiting),
					userReject(t, "r1", "call-1", "user"),
					stateEvent(t, "s3", StatusIdle),
					message(t, "m1", "user", "user"),
					stateEvent(t, "s4", StatusRunning),
					stateEvent(t, "s5", StatusFinished),
				}
			},
			want: []string{
				"run.started", "state.delta",
				"tool.requested",
				"state.delta", "attention.requested",
				"x.openhands.user_reject.observation",
				// waiting → idle only resolves (pinned); the receiver then
				// closes run 1 as running → idle would.
				"state.delta", "attention.resolved", "run.finished",
				"x.openhands.message.event",
				"run.started", "state.delta",
				"state.delta", "run.finished",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(aep.CaptureMetadata, false))
			out := append([]*aep.Event{c.Start(received, received)}, feed(t, c, tc.events(t)...)...)
			requireValid(t, out)
			requireLifecycle(t, out)
			assert.Equal(t, append([]string{typeSessionStarted}, tc.want...), types(out))

			requested := findType(out, typeAttentionRequested)
			resolved := findType(out, typeAttentionResolved)
			assert.Equal(t, requested.ID, resolved.Subject)
			assert.Equal(t, requested.ID, resolved.Cause)
			assert.Equal(t, "answered", resolved.Data["resolution"])
			assert.Equal(t, map[string]any{
				"vendor_ts": vendorTS, "vendor_event_id": "s2", "kind": "permission", "prompt": waitingPrompt,
			}, requested.Data, "no options, no respond path")

			started := findType(out, typeRunStarted)
			assert.Equal(t, "run:conv-1:1", started.Run)
			assert.Equal(t, "run:conv-1:1", findType(out, "tool.requested").Run)
			assert.Equal(t, "run:conv-1:1", requested.Run)
			finished := findType(out, typeRunFinished)
			for _, ev := range out {
				if ev.Type == typeRunStarted && ev.Run == finished.Run {
					assert.Equal(t, ev.ID, finished.Cause, "the terminal's cause is its run.started")
				}
			}
			if last := out[len(out)-1]; last.Type == "state.snapshot" {
				assert.Empty(t, last.Run, "the snapshot after the terminal belongs to no run")
			}
		})
	}
}

// TestNoRunLeftOpen pins the receiver's rule beside the pinned table: a
// status with no run under way (idle, finished, error, stuck) reached while
// a run is open, through a transition the table closes nothing on, ends
// that run with run.finished {reason: idle}, after the attention the table
// resolved and the state event, so the next run never starts over an open
// one.
func TestNoRunLeftOpen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []string
		want     []string // outputs of the last status
	}{
		// The real server after a rejected confirmation: waiting → idle
		// (the UserRejectObservation follows).
		{"waiting_to_idle", []string{StatusRunning, StatusWaiting, StatusIdle},
			[]string{"state.delta", "attention.resolved", "run.finished"}},
		{"paused_to_idle", []string{StatusRunning, StatusPaused, StatusIdle},
			[]string{"state.delta", "run.finished"}},
		{"future_status_to_finished", []string{StatusRunning, "archived", StatusFinished},
			[]string{"state.delta", "run.finished"}},
		{"future_status_to_error", []string{StatusRunning, "archived", StatusError},
			[]string{"state.delta", "run.finished"}},
		{"future_status_to_stuck", []string{StatusRunning, "archived", StatusStuck},
			[]string{"state.delta", "run.finished"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(aep.CaptureMetadata, false))
			var out, last []*aep.Event
			for i, s := range tc.statuses {
				last = c.Map(stateEvent(t, "s"+string(rune('a'+i)), s), received)
				out = append(out, last...)
			}
			out = append(out, c.Map(stateEvent(t, "sz", StatusRunning), received)...)
			requireValid(t, out)
			requireLifecycle(t, out)
			require.Equal(t, tc.want, types(last))
			finished := last[len(last)-1]
			assert.Equal(t, "run:conv-1:1", finished.Run)
			assert.Equal(t, findType(out, typeRunStarted).ID, finished.Cause)
			assert.Equal(t, "idle", finished.Data["reason"])
			assert.Equal(t, "run:conv-1:2", out[len(out)-1].Run, "the next running opens run 2")
		})
	}
}

func TestTerminalStatuses(t *testing.T) {
	for _, tc := range []struct {
		status string
		level  aep.Capture
		want   []string
		data   map[string]any // the terminal's data beyond the vendor stamps
	}{
		{StatusFinished, aep.CaptureMetadata, []string{"state.delta", "run.finished"}, map[string]any{}},
		{StatusError, aep.CaptureMetadata, []string{"state.delta", "run.failed"}, map[string]any{"reason": "error"}},
		{StatusStuck, aep.CaptureMetadata, []string{"state.delta", "run.failed"}, map[string]any{"reason": "stuck"}},
		{StatusIdle, aep.CaptureMetadata, []string{"state.delta", "run.finished"}, map[string]any{"reason": "idle"}},
		// run.cancelled.reason is annotated redacted: absent at metadata.
		{StatusDeleting, aep.CaptureMetadata, []string{"state.delta", "run.cancelled", "session.ended"}, map[string]any{}},
		{StatusDeleting, aep.CaptureRedacted, []string{"state.delta", "run.cancelled", "session.ended"}, map[string]any{"reason": "deleting"}},
	} {
		t.Run(tc.status+"_"+string(tc.level), func(t *testing.T) {
			c := newConversation(t, testConfig(tc.level, false))
			opened := c.Map(stateEvent(t, "s1", StatusRunning), received)
			out := c.Map(stateEvent(t, "s2", tc.status), received)
			all := append(opened, out...)
			requireValid(t, all)
			requireLifecycle(t, all)
			require.Equal(t, tc.want, types(out))
			terminal := out[1]
			assert.Equal(t, "run:conv-1:1", out[0].Run, "the state event still carries the run")
			assert.Equal(t, "run:conv-1:1", terminal.Run, "the terminal carries the run it closes")
			assert.Equal(t, opened[0].ID, terminal.Cause)
			want := map[string]any{"vendor_ts": vendorTS, "vendor_event_id": "s2"}
			for k, v := range tc.data {
				want[k] = v
			}
			assert.Equal(t, want, terminal.Data)
			if tc.status == StatusDeleting {
				assert.Equal(t, "killed", out[2].Data["reason"])
				assert.Empty(t, out[2].Run)
			}
			// A second report of the same or another closing status closes nothing.
			assert.Empty(t, findType(c.Map(fullState(t, "f1", tc.status), received), terminal.Type))
		})
	}
}

func TestDeletingWithPendingAttention(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	out := feed(t, c,
		stateEvent(t, "s1", StatusRunning),
		stateEvent(t, "s2", StatusWaiting),
		stateEvent(t, "s3", StatusDeleting),
	)
	requireValid(t, out)
	requireLifecycle(t, out)
	tail := out[len(out)-4:]
	require.Equal(t, []string{"state.delta", "attention.resolved", "run.cancelled", "session.ended"}, types(tail))
	assert.Equal(t, "dismissed", tail[1].Data["resolution"])
	assert.Equal(t, findType(out, typeAttentionRequested).ID, tail[1].Subject)
}

func TestEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []string
		want   []string
	}{
		{"pending_attention", []string{StatusRunning, StatusWaiting}, []string{"attention.resolved", "run.cancelled", "session.ended"}},
		{"open_run", []string{StatusRunning}, []string{"run.cancelled", "session.ended"}},
		{"paused_run", []string{StatusRunning, StatusPaused}, []string{"run.cancelled", "session.ended"}},
		{"run_closed_by_waiting_idle", []string{StatusRunning, StatusWaiting, StatusIdle}, []string{"session.ended"}},
		{"closed_run", []string{StatusRunning, StatusFinished}, []string{"session.ended"}},
		{"no_status_yet", nil, []string{"session.ended"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(aep.CaptureMetadata, false))
			var out []*aep.Event
			for i, s := range tc.before {
				out = append(out, c.Map(stateEvent(t, "s"+string(rune('a'+i)), s), received)...)
			}
			end := c.End(received, "2026-07-12T10:16:00")
			out = append(out, end...)
			requireValid(t, out)
			requireLifecycle(t, out)
			require.Equal(t, tc.want, types(end))
			for _, ev := range end {
				assert.Equal(t, "2026-07-12T10:16:00", ev.Data["vendor_ts"])
				assert.NotContains(t, ev.Data, "vendor_event_id")
			}
			assert.Equal(t, "killed", end[len(end)-1].Data["reason"])
			assert.Nil(t, c.End(received, "2026-07-12T10:16:00"), "never session.ended twice")
		})
	}
}

func TestNothingAfterSessionEnded(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, true))
	require.Equal(t, typeSessionEnded, findType(feed(t, c, stateEvent(t, "s1", StatusDeleting)), typeSessionEnded).Type)
	assert.Empty(t, feed(t, c,
		stateEvent(t, "s2", StatusRunning),
		action(t, "a1", "call-1"),
		message(t, "m1", "user", "user"),
		vendorEvent(t, map[string]any{"kind": "StreamingDeltaEvent", "id": "d1", "content": "x"}),
	))
	assert.Nil(t, c.End(received, ""))
	assert.Nil(t, c.Start(received, received))
}

func TestRunGuards(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []string
		want     []string
	}{
		{"paused_first_then_running", []string{StatusPaused, StatusRunning},
			[]string{"state.delta", "run.started", "state.delta"}},
		{"paused_first_then_waiting", []string{StatusPaused, StatusWaiting},
			[]string{"state.delta", "run.started", "state.delta", "attention.requested"}},
		{"first_seen_waiting", []string{StatusWaiting},
			[]string{"run.started", "state.delta", "attention.requested"}},
		{"finished_then_error", []string{StatusRunning, StatusFinished, StatusError},
			[]string{"run.started", "state.delta", "state.delta", "run.finished", "state.delta"}},
		{"first_seen_finished", []string{StatusFinished}, []string{"state.delta"}},
		{"waiting_idle_then_running", []string{StatusRunning, StatusWaiting, StatusIdle, StatusRunning},
			[]string{"run.started", "state.delta", "state.delta", "attention.requested",
				"state.delta", "attention.resolved", "run.finished", "run.started", "state.delta"}},
		{"future_status_keeps_the_run", []string{StatusRunning, "archived", StatusRunning, StatusFinished},
			[]string{"run.started", "state.delta", "state.delta", "state.delta", "state.delta", "run.finished"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(aep.CaptureMetadata, false))
			var out []*aep.Event
			for i, s := range tc.statuses {
				out = append(out, c.Map(stateEvent(t, "s"+string(rune('a'+i)), s), received)...)
			}
			requireValid(t, out)
			requireLifecycle(t, out)
			assert.Equal(t, tc.want, types(out))
		})
	}
	t.Run("full_state_reports_status", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		out := c.Map(fullState(t, "f1", StatusRunning), received)
		assert.Equal(t, []string{"run.started", "state.snapshot"}, types(out))
		assert.Equal(t, "run:conv-1:1", out[1].Run)
	})
	t.Run("non_string_status_is_no_status", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		out := c.Map(vendorEvent(t, map[string]any{"kind": "ConversationStateUpdateEvent", "id": "s1",
			"key": "execution_status", "value": 3}), received)
		assert.Equal(t, []string{"state.delta"}, types(out))
		out = c.Map(vendorEvent(t, map[string]any{"kind": "ConversationStateUpdateEvent", "id": "s2",
			"key": "execution_status"}), received)
		assert.Equal(t, []string{"state.delta"}, types(out))
	})
}

// TestDeterministicIDs: two conversations fed the same vendor facts emit the
// same events, ids included, whatever the receive times.
func TestDeterministicIDs(t *testing.T) {
	f := loadFixture(t)
	run := func(at time.Time) []string {
		c := newConversation(t, testConfig(aep.CaptureRedacted, true))
		out := []*aep.Event{c.Start(received, at)}
		for _, tc := range fixtureCases(f) {
			ev, err := DecodeEvent(tc.Input)
			require.NoError(t, err)
			out = append(out, c.Map(ev, at)...)
		}
		out = append(out, c.End(at, vendorTS)...)
		requireLifecycle(t, out)
		ids := make([]string, len(out))
		for i, ev := range out {
			ids[i] = ev.Type + " " + ev.ID
		}
		return ids
	}
	first := run(received)
	assert.Equal(t, first, run(received))
	assert.Equal(t, first, run(received.Add(time.Minute)))
}

func TestIDTimeIsVendorTime(t *testing.T) {
	for _, tc := range []struct {
		name, ts string
		want     time.Time
	}{
		{"microseconds", "2026-07-12T10:15:00.123456", time.Date(2026, 7, 12, 10, 15, 0, 123_000_000, time.UTC)},
		{"whole_seconds", "2026-07-12T10:15:00", time.Date(2026, 7, 12, 10, 15, 0, 0, time.UTC)},
		{"with_offset", "2026-07-12T12:15:00+02:00", time.Date(2026, 7, 12, 10, 15, 0, 0, time.UTC)},
		{"unparsable", "yesterday", received},
		{"absent", "", received},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields := map[string]any{"kind": "PauseEvent", "id": "p1", "source": "user"}
			if tc.ts != "" {
				fields["timestamp"] = tc.ts
			}
			out := newConversation(t, testConfig(aep.CaptureMetadata, false)).Map(vendorEvent(t, fields), received)
			require.Len(t, out, 1)
			assert.Equal(t, aep.DeterministicID(tc.want, "")[:10], out[0].ID[:10], "the id's time part")
			if tc.ts == "" {
				assert.NotContains(t, out[0].Data, "vendor_ts")
			} else {
				assert.Equal(t, tc.ts, out[0].Data["vendor_ts"], "carried verbatim")
			}
		})
	}
}

func TestDegradesToVendorPlane(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields map[string]any
		want   string
	}{
		{"action_without_tool_name", map[string]any{"kind": "ActionEvent", "action": map[string]any{}}, "x.openhands.action.event"},
		{"observation_without_observation", map[string]any{"kind": "ObservationEvent", "tool_name": "t"}, "x.openhands.observation.event"},
		{"observation_not_an_object", map[string]any{"kind": "ObservationEvent", "tool_name": "t", "observation": "x"}, "x.openhands.observation.event"},
		{"agent_error_numeric_tool", map[string]any{"kind": "AgentErrorEvent", "tool_name": 3}, "x.openhands.agent.error"},
		{"reject_without_tool_name", map[string]any{"kind": "UserRejectObservation", "rejection_source": "hook"}, "x.openhands.user_reject.observation"},
		{"state_without_key", map[string]any{"kind": "ConversationStateUpdateEvent", "value": "running"}, "x.openhands.conversation_state.update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fields["id"] = "v1"
			out := newConversation(t, testConfig(aep.CaptureMetadata, false)).Map(vendorEvent(t, tc.fields), received)
			require.Len(t, out, 1)
			requireValid(t, out)
			assert.Equal(t, tc.want, out[0].Type)
			assert.Equal(t, map[string]any{"vendor_event_id": "v1"}, out[0].Data)
		})
	}
}

func TestObservationText(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content any
		want    string
	}{
		{"string", "plain", "plain"},
		{"items_joined", []any{
			map[string]any{"type": "text", "text": "a"},
			map[string]any{"type": "image", "image_urls": []any{"u"}},
			map[string]any{"type": "text", "text": "b"},
		}, "ab"},
		{"absent", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := map[string]any{"kind": "X", "is_error": false}
			if tc.content != nil {
				obs["content"] = tc.content
			}
			out := newConversation(t, testConfig(aep.CaptureFull, false)).Map(vendorEvent(t, map[string]any{
				"kind": "ObservationEvent", "id": "o1", "tool_name": "t", "observation": obs,
			}), received)
			require.Len(t, out, 1)
			digest, err := aep.Digest(tc.want)
			require.NoError(t, err)
			assert.Equal(t, digest, out[0].Data["result_digest"])
			assert.Equal(t, tc.want, out[0].Data["result"])
		})
	}
}

func TestMapConnectSnapshot(t *testing.T) {
	snapshot := func(status string) Event {
		ev, err := DecodeEvent([]byte(`{"kind":"ConversationStateUpdateEvent","id":"snap-` + status + `","timestamp":"2026-07-12T10:15:00","source":"environment","key":"full_state","value":{"execution_status":"` + status + `"}}`))
		require.NoError(t, err)
		return ev
	}
	t.Run("first status fact counts", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		out := c.MapConnectSnapshot(snapshot("running"), time.Now())
		assert.Equal(t, []string{"run.started", "state.snapshot"}, types(out))
		assert.Equal(t, "running", c.Status())
	})
	t.Run("stale snapshot after history does not move the status", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		c.Map(snapshot("running"), time.Now())
		out := c.MapConnectSnapshot(snapshot("idle"), time.Now())
		assert.Equal(t, []string{"state.snapshot"}, types(out))
		assert.Equal(t, "running", c.Status())
		out = c.Map(snapshot("finished"), time.Now())
		assert.Equal(t, []string{"state.snapshot", "run.finished"}, types(out), "later snapshots drive the status again")
	})
}

// TestParseVendorTime: the one reading of the server's timestamps, an
// event's naive ones as UTC, a ConversationInfo's with their offset.
func TestParseVendorTime(t *testing.T) {
	for _, tc := range []struct {
		ts   string
		want time.Time
		ok   bool
	}{
		{"2026-07-12T10:15:00.123456", time.Date(2026, 7, 12, 10, 15, 0, 123456000, time.UTC), true},
		{"2026-07-12T10:15:00", time.Date(2026, 7, 12, 10, 15, 0, 0, time.UTC), true},
		{"2026-07-12T10:15:00.5Z", time.Date(2026, 7, 12, 10, 15, 0, 500000000, time.UTC), true},
		{"2026-07-12T12:15:00+02:00", time.Date(2026, 7, 12, 10, 15, 0, 0, time.UTC), true},
		{"", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"2026-07-12 10:15:00", time.Time{}, false},
	} {
		got, ok := ParseVendorTime(tc.ts)
		assert.Equal(t, tc.ok, ok, "%q", tc.ts)
		assert.True(t, tc.want.Equal(got), "%q: %v", tc.ts, got)
	}
}
