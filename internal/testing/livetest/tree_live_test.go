//go:build live

package livetest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
)

// startChildTool is the tool the agent server attaches when a
// conversation's agent names it (agent_server/tool_router.py, registered
// there only; tools/child_conversation/definition.py).
const startChildTool = "start_child_conversation"

// TestLiveTree proves the conversation tree against the real agent server:
// a conversation's agent starts a child conversation (the fake LLM scripts
// the start_child_conversation call, and the child's task names the
// child's own script), then the test forks the parent up to the launch's
// observation. Every receiver, in each socket mode and at each capture
// level, must show the tree: the child's session.started names its parent,
// the parent's stream holds delegation.subagent.started cause-linked to
// the launch's tool.completed and delegation.subagent.stopped once the
// child finished, and the fork's session.started names its source.
//
// Two more receivers take the server's webhooks, one beside its sockets,
// one alone (webhook.only), both polling once an hour: for them the child
// and the fork are found by push (a fork by its first event batch: the
// server posts no ConversationInfo for it), the child's stop comes from
// its own stream, and a deletion from the pushed status deleting. A child
// started by a direct POST .../children has its parent and no delegation.*
// events; a tags update is one state.delta; at redacted the stats keep
// their token counts.
func TestLiveTree(t *testing.T) {
	l := startLive(t, []string{"events", "session"}, hookSockets, hookOnly)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	started := time.Now()

	parent, err := l.open(ctx, conversationSpec{script: "tree_parent", tools: []string{startChildTool}})
	require.NoError(t, err)
	require.NoError(t, awaitEvent("ObservationEvent", startChildTool)(ctx, l, parent))
	launch := childLaunch(ctx, t, l, parent)
	child := launch.Observation.ConversationID
	// The parent's run stays open (its agent waits in the terminal for
	// child-seen) until every receiver has found the child, so each knows
	// the run the child was launched in, whatever the machine's load.
	require.NoError(t, poll(ctx, "every receiver to find the child", func() (bool, error) {
		for _, r := range l.receivers {
			if !slices.ContainsFunc(r.sessionEvents(child), func(ev *aep.Event) bool { return ev.Type == "session.started" }) {
				return false, nil
			}
		}
		return true, nil
	}))
	require.NoError(t, os.WriteFile(filepath.Join(l.server.dir, "workspace", "tree_parent", "child-seen"), nil, 0o644))
	require.NoError(t, awaitStatus("finished")(ctx, l, parent))
	require.NoError(t, awaitStatus("finished")(ctx, l, child))
	l.names[child] = "tree_child"

	var parentInfo, childInfo treeInfo
	_, err = l.server.call(ctx, http.MethodGet, "/api/conversations/"+parent, nil, &parentInfo)
	require.NoError(t, err)
	_, err = l.server.call(ctx, http.MethodGet, "/api/conversations/"+child, nil, &childInfo)
	require.NoError(t, err)
	assert.Equal(t, []string{child}, parentInfo.SubConversationIDs, "the parent lists its child")
	assert.Equal(t, parent, childInfo.ParentConversationID, "the child names its parent")
	assert.Equal(t, "file counter", childInfo.Title, "the child's title is the launch's")

	// The fork: up to and including the launch's observation.
	var fork treeInfo
	status, err := l.server.call(ctx, http.MethodPost, "/api/conversations/"+parent+"/fork",
		map[string]any{"from_event_id": launch.ID, "title": "tree fork"}, &fork)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, status)
	assert.Equal(t, "idle", fork.Status, "a fork starts idle")
	assert.Equal(t, parent, fork.ForkedFromConversationID)
	assert.Equal(t, launch.ID, fork.ForkedFromEventID)
	assert.Empty(t, fork.ParentConversationID, "a fork of a root is no child")
	forkEvents, err := l.server.events(ctx, fork.ID)
	require.NoError(t, err)
	require.NotEmpty(t, forkEvents)
	parentEvents, err := l.server.events(ctx, parent)
	require.NoError(t, err)
	upTo := slices.IndexFunc(parentEvents, func(ev map[string]any) bool { return ev["id"] == launch.ID })
	require.GreaterOrEqual(t, upTo, 0)
	// The branch (path_to_root), which in a conversation without branches
	// is its events up to there but the state updates.
	branch := slices.DeleteFunc(parentEvents[:upTo+1], func(ev map[string]any) bool { return ev["kind"] == "ConversationStateUpdateEvent" })
	assert.Equal(t, eventIDs(branch), eventIDs(forkEvents),
		"the fork's history is the parent's branch up to and including from_event_id, with the same ids")
	raw, _ := json.Marshal(fork)
	t.Logf("the fork: %s; its events: %v", raw, eventKinds(forkEvents))
	l.names[fork.ID] = "tree_fork"
	forked := time.Now()
	require.NoError(t, poll(ctx, "every receiver to find the fork", func() (bool, error) {
		return l.allShow(fork.ID, "session.started"), nil
	}))
	// Bounded by flush_delay (2 s here) for the webhook receivers; the
	// bound is slack for a loaded machine, not a target.
	t.Logf("the fork found by every receiver after %s (webhook flush_delay %d s, their poll_interval 1h)",
		time.Since(forked).Round(time.Millisecond), hookFlushDelay)
	assert.Less(t, time.Since(forked), time.Minute, "the webhook receivers found the fork by push")
	t.Logf("the tree (parent, child, fork) took %s on the server", time.Since(started).Round(time.Second))

	// A child started without the tool: its parent, no delegation.*; then
	// deleted, which the webhook receivers learn from the pushed status.
	var direct struct {
		ConversationID string `json:"conversation_id"`
	}
	_, err = l.server.call(ctx, http.MethodPost, "/api/conversations/"+parent+"/children",
		map[string]any{"task": "Count the files in the workspace and report the number. [[script:tree_child]]", "title": "direct", "isolation": "shared"}, &direct)
	require.NoError(t, err)
	require.NotEmpty(t, direct.ConversationID)
	l.names[direct.ConversationID] = "tree_direct_child"
	require.NoError(t, awaitStatus("finished")(ctx, l, direct.ConversationID))
	require.NoError(t, poll(ctx, "every receiver to find the direct child", func() (bool, error) {
		return l.allShow(direct.ConversationID, "session.started"), nil
	}))
	require.NoError(t, deleteConversation(ctx, l, direct.ConversationID))

	// Tags are a state field: the update is a stored state event, and the
	// server pushes the ConversationInfo as well. The rename after it is
	// pushed after it, so once it shows, both pushes were taken in.
	_, err = l.server.call(ctx, http.MethodPatch, "/api/conversations/"+parent, map[string]any{"tags": map[string]string{"team": "tree"}}, nil)
	require.NoError(t, err)
	_, err = l.server.call(ctx, http.MethodPatch, "/api/conversations/"+parent, map[string]any{"title": "tree parent"}, nil)
	require.NoError(t, err)
	require.NoError(t, poll(ctx, "every webhook receiver to show the rename", func() (bool, error) {
		for _, r := range l.receivers {
			if r.hook != "" && len(stateDeltas(r.sessionEvents(parent), "title")) == 0 {
				return false, nil
			}
		}
		return true, nil
	}))

	truth := map[string][]map[string]any{}
	for id := range l.names {
		if evs, gone := l.deleted[id]; gone {
			truth[id] = evs
			continue
		}
		truth[id], err = l.server.events(ctx, id)
		require.NoError(t, err)
	}
	var last []string
	err = poll(ctx, "every receiver to show the tree", func() (bool, error) {
		last = nil
		for _, r := range l.receivers {
			var problems []string
			for id, evs := range truth {
				if r.level != aep.CaptureNone {
					_, gone := l.deleted[id]
					for _, p := range coverage(evs, r.sessionEvents(id), gone) {
						problems = append(problems, l.names[id]+": "+p)
					}
				}
			}
			problems = append(problems, treeProblems(r, parent, child, fork.ID, launch)...)
			problems = append(problems, directChildProblems(r, parent, direct.ConversationID)...)
			if r.level != aep.CaptureNone {
				if n := len(stateDeltas(r.sessionEvents(parent), "tags")); n != 1 {
					problems = append(problems, fmt.Sprintf("%d state.delta of tags, want 1", n))
				}
			}
			if r.level == aep.CaptureRedacted {
				problems = append(problems, tokenUsageProblems(r.sessionEvents(parent))...)
			}
			for _, p := range problems {
				last = append(last, r.label()+" "+p)
			}
		}
		return len(last) == 0, nil
	})
	if err != nil {
		t.Errorf("the tree in AEP:\n%s", strings.Join(last, "\n"))
	}
	for _, r := range l.receivers {
		if r.level != aep.CaptureNone {
			assertDelegatedTrace(t, r, parent, child)
		}
		if r.hook != "" {
			ended, stopped := eventTime(r, child, "run.finished"), eventTime(r, parent, "delegation.subagent.stopped")
			t.Logf("%s: delegation.subagent.stopped at %s, %s after the child's run ended on the server at %s (poll_interval 1h)",
				r.label(), stopped.Format(time.StampMicro), stopped.Sub(ended).Round(time.Millisecond), ended.Format(time.StampMicro))
		}
		for _, v := range r.relay.Violations() {
			t.Errorf("%s relay violation: %s", r.label(), v)
		}
		if r.hook == hookOnly {
			assertGETOnly(t, r.rec.Transcript())
			assert.Empty(t, r.rec.Transcript().Sockets, "%s: webhook.only opens no socket", r.label())
		} else {
			assertReadOnly(t, r.rec.Transcript())
		}
	}
	for _, c := range l.cols {
		require.True(t, c.Running(), "a collector exited:\n%s", tail(c.logText(), 4000))
	}
	t.Logf("the tree took %s in all", time.Since(started).Round(time.Second))
}

// eventTime is the time of a session's first event of typ: the server's
// for a mapped event, the receiver's for one it adds (delegation.*).
func eventTime(r *receiverUnderTest, session, typ string) time.Time {
	for _, ev := range r.sessionEvents(session) {
		if ev.Type == typ {
			t, _ := time.Parse(time.RFC3339Nano, ev.Time)
			return t
		}
	}
	return time.Time{}
}

// allShow reports whether every receiver shows an event of typ in session.
func (l *live) allShow(session, typ string) bool {
	for _, r := range l.receivers {
		if !slices.ContainsFunc(r.sessionEvents(session), func(ev *aep.Event) bool { return ev.Type == typ }) {
			return false
		}
	}
	return true
}

// stateDeltas is a session's state.delta events of key.
func stateDeltas(events []*aep.Event, key string) []*aep.Event {
	return slices.DeleteFunc(slices.Clone(events), func(ev *aep.Event) bool { return ev.Type != "state.delta" || ev.Data["key"] != key })
}

// directChildProblems is what one receiver's stream lacks of a child
// started by a direct POST .../children: its session.started names the
// parent; the parent's stream names it in no delegation.* event (no tool
// call delegated it); its session ended when it was deleted.
func directChildProblems(r *receiverUnderTest, parent, child string) []string {
	var problems []string
	events := r.sessionEvents(child)
	if !slices.ContainsFunc(events, func(ev *aep.Event) bool { return ev.Type == "session.ended" }) {
		problems = append(problems, "the deleted direct child's session did not end")
	}
	for _, ev := range r.sessionEvents(parent) {
		if strings.HasPrefix(ev.Type, "delegation.") && fmt.Sprint(ev.Data["child"]) == fmt.Sprint(map[string]any{"session": child, "agent": ev.Agent}) {
			problems = append(problems, ev.Type+" names the direct child")
		}
	}
	if r.level == aep.CaptureNone {
		return problems
	}
	i := slices.IndexFunc(events, func(ev *aep.Event) bool { return ev.Type == "session.started" })
	if i < 0 {
		return append(problems, "no session.started of the direct child")
	}
	if ref, _ := events[i].Data["parent"].(map[string]any); ref["session"] != parent {
		problems = append(problems, fmt.Sprintf("the direct child's session.started names the parent %v, want %s", ref, parent))
	}
	return problems
}

// tokenUsageProblems: at redacted the stats deltas keep their token
// counts (accumulated_token_usage is no credential).
func tokenUsageProblems(events []*aep.Event) []string {
	stats := stateDeltas(events, "stats")
	if len(stats) == 0 {
		return []string{"no state.delta of stats"}
	}
	var problems []string
	for _, ev := range stats {
		raw, _ := json.Marshal(ev.Data["delta"])
		var delta []struct {
			Value struct {
				UsageToMetrics map[string]struct {
					AccumulatedTokenUsage any `json:"accumulated_token_usage"`
				} `json:"usage_to_metrics"`
			} `json:"value"`
		}
		if err := json.Unmarshal(raw, &delta); err != nil || len(delta) != 1 || len(delta[0].Value.UsageToMetrics) == 0 {
			problems = append(problems, fmt.Sprintf("a stats delta without usage: %s", raw))
			continue
		}
		for usageID, m := range delta[0].Value.UsageToMetrics {
			if usage, ok := m.AccumulatedTokenUsage.(map[string]any); !ok || usage["prompt_tokens"] == nil {
				problems = append(problems, fmt.Sprintf("the stats delta's accumulated_token_usage of %s is %v", usageID, m.AccumulatedTokenUsage))
			}
		}
	}
	return problems
}

// treeInfo is the tree's part of ConversationInfo.
type treeInfo struct {
	ID                       string   `json:"id"`
	Status                   string   `json:"execution_status"`
	Title                    string   `json:"title"`
	ParentConversationID     string   `json:"parent_conversation_id"`
	SubConversationIDs       []string `json:"sub_conversation_ids"`
	ForkedFromConversationID string   `json:"forked_from_conversation_id"`
	ForkedFromEventID        string   `json:"forked_from_event_id"`
}

// launchObservation is the ObservationEvent of a start_child_conversation
// call, as the server persisted it.
type launchObservation struct {
	ID          string `json:"id"`
	ToolCallID  string `json:"tool_call_id"`
	Observation struct {
		Kind                 string `json:"kind"`
		IsError              bool   `json:"is_error"`
		ConversationID       string `json:"conversation_id"`
		ParentConversationID string `json:"parent_conversation_id"`
		Status               string `json:"status"`
		Title                string `json:"title"`
		Workspace            string `json:"workspace"`
		Isolation            string `json:"isolation"`
	} `json:"observation"`
}

// childLaunch finds the launch's observation in the parent's log and
// checks what the server put on it.
func childLaunch(ctx context.Context, t *testing.T, l *live, parent string) launchObservation {
	evs, err := l.server.events(ctx, parent)
	require.NoError(t, err)
	var launches []launchObservation
	for _, ev := range evs {
		if ev["kind"] != "ObservationEvent" || ev["tool_name"] != startChildTool {
			continue
		}
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		t.Logf("the launch's observation: %s", raw)
		var o launchObservation
		require.NoError(t, json.Unmarshal(raw, &o))
		launches = append(launches, o)
	}
	require.Len(t, launches, 1, "one start_child_conversation observation in the parent")
	o := launches[0]
	require.False(t, o.Observation.IsError, "the launch failed")
	assert.Equal(t, "StartChildConversationObservation", o.Observation.Kind)
	assert.Equal(t, parent, o.Observation.ParentConversationID)
	assert.Equal(t, "file counter", o.Observation.Title)
	assert.Equal(t, "shared", o.Observation.Isolation)
	require.NotEmpty(t, o.Observation.ConversationID)
	return o
}

func eventIDs(evs []map[string]any) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, fmt.Sprint(ev["id"]))
	}
	return out
}

func eventKinds(evs []map[string]any) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, fmt.Sprint(ev["kind"]))
	}
	return out
}

// treeProblems is what one receiver's stream lacks of the tree.
func treeProblems(r *receiverUnderTest, parent, child, fork string, launch launchObservation) []string {
	var problems []string
	one := func(session, typ string, match func(*aep.Event) bool) *aep.Event {
		var found []*aep.Event
		for _, ev := range r.sessionEvents(session) {
			if ev.Type == typ && match(ev) {
				found = append(found, ev)
			}
		}
		if len(found) != 1 {
			problems = append(problems, fmt.Sprintf("%d %s in session %s, want 1", len(found), typ, session))
			return nil
		}
		return found[0]
	}
	every := func(*aep.Event) bool { return true }
	completed := one(parent, "tool.completed", func(ev *aep.Event) bool { return ev.Subject == startChildTool })
	subStarted := one(parent, "delegation.subagent.started", every)
	subStopped := one(parent, "delegation.subagent.stopped", every)
	parentStarted := one(parent, "session.started", every)
	childStarted := one(child, "session.started", every)
	forkStarted := one(fork, "session.started", every)
	if completed == nil || subStarted == nil || subStopped == nil || parentStarted == nil || childStarted == nil || forkStarted == nil {
		return problems
	}
	check := func(ok bool, format string, args ...any) {
		if !ok {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	check(subStarted.Cause == completed.ID, "delegation.subagent.started's cause is %q, want the launch's tool.completed %s", subStarted.Cause, completed.ID)
	check(subStarted.Run != "" && subStarted.Run == completed.Run, "delegation.subagent.started sits in run %q, the launch's tool.completed in %q", subStarted.Run, completed.Run)
	check(subStopped.Cause == subStarted.ID, "delegation.subagent.stopped's cause is %q, want delegation.subagent.started %s", subStopped.Cause, subStarted.ID)
	if r.level == aep.CaptureNone {
		// The envelope alone: who names whom is data, which none drops.
		return problems
	}
	check(completed.Data["vendor_event_id"] == launch.ID, "the launch's tool.completed stands for vendor event %v, want %s", completed.Data["vendor_event_id"], launch.ID)
	tool, _ := completed.Data["tool"].(map[string]any)
	check(tool["call_id"] == launch.ToolCallID, "the launch's tool.completed names the call %v, want %s", tool, launch.ToolCallID)
	call, _ := subStarted.Data["tool"].(map[string]any)
	check(call["call_id"] == launch.ToolCallID, "delegation.subagent.started names the call %v, want %s", call, launch.ToolCallID)
	childRef, _ := subStarted.Data["child"].(map[string]any)
	check(childRef["session"] == child && childRef["agent"] == childStarted.Agent, "delegation.subagent.started names the child %v, want session %s agent %s", childRef, child, childStarted.Agent)
	childRef, _ = subStopped.Data["child"].(map[string]any)
	check(childRef["session"] == child, "delegation.subagent.stopped names the child %v, want %s", childRef, child)
	check(subStopped.Data["status"] == "finished", "delegation.subagent.stopped's status is %v, want finished", subStopped.Data["status"])

	ref, _ := childStarted.Data["parent"].(map[string]any)
	check(ref["session"] == parent && ref["agent"] == parentStarted.Agent,
		"the child's session.started names the parent %v, want session %s agent %s", ref, parent, parentStarted.Agent)
	check(ref["run"] == completed.Run, "the child's session.started names the parent's run %v, want the launch's %s", ref["run"], completed.Run)
	_, forked := childStarted.Data["x.openhands.forked_from"]
	check(!forked, "the child's session.started names a fork source")

	from, _ := forkStarted.Data["x.openhands.forked_from"].(map[string]any)
	check(from["session"] == parent && from["event"] == launch.ID,
		"the fork's session.started x.openhands.forked_from is %v, want session %s event %s", from, parent, launch.ID)
	_, hasParent := forkStarted.Data["parent"]
	check(!hasParent, "the fork of a root names a parent")
	return problems
}

// assertDelegatedTrace feeds a receiver's stream, as the relay received
// it, to the aep connector: every span of the child is in the trace its log
// records name (traceparent), and when the child's session.started names
// the parent's run, the child's runs are spans under the parent's
// start_child_conversation call span, in its trace.
func assertDelegatedTrace(t *testing.T, r *receiverUnderTest, parent, child string) {
	f := aepconnector.NewFactory()
	sink := new(consumertest.TracesSink)
	conn, err := f.CreateLogsToTraces(context.Background(), connectortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	var call, parentRun string
	childRuns := map[string]bool{}
	recordTrace := map[string]string{} // the child's records: span id → trace id
	delegated := false
	for _, rec := range r.relay.Events() {
		ev := rec.Event
		switch {
		case ev.Session == parent && ev.Type == "tool.completed" && ev.Subject == startChildTool:
			call = ev.Traceparent
		case ev.Session == parent && ev.Type == "run.started":
			parentRun = ev.Traceparent
		case ev.Session == child && ev.Type == "session.started":
			ref, _ := ev.Data["parent"].(map[string]any)
			delegated = ref["run"] != nil
		case ev.Session == child && ev.Run != "":
			childRuns[ev.Run] = true
		}
		if parts := strings.Split(ev.Traceparent, "-"); ev.Session == child && len(parts) == 4 {
			if prev, seen := recordTrace[parts[2]]; seen {
				assert.Equal(t, prev, parts[1], "%s: the child's records of span %s name one trace", r.label(), parts[2])
			}
			recordTrace[parts[2]] = parts[1]
		}
		logs := plog.NewLogs()
		rl := logs.ResourceLogs().AppendEmpty()
		projection.SetResource(rl.Resource(), ev.Agent)
		require.NoError(t, projection.ToLogRecord(ev, rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty(), projection.Options{}))
		require.NoError(t, conn.ConsumeLogs(context.Background(), logs))
	}
	parts := strings.Split(call, "-")
	require.Len(t, parts, 4, "the launch's tool.completed carries the call's traceparent, not %q", call)
	require.NotEmpty(t, childRuns)
	placed, agreed := 0, 0
	for _, td := range sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					run, _ := s.Attributes().Get("aep.run_id")
					if !childRuns[run.Str()] {
						continue
					}
					if trace, ok := recordTrace[s.SpanID().String()]; assert.True(t, ok, "%s: span %s of the child has log records", r.label(), s.Name()) {
						assert.Equal(t, trace, s.TraceID().String(), "%s: the child's span %s is in the trace its log records name", r.label(), s.Name())
						agreed++
					}
					if op, _ := s.Attributes().Get("gen_ai.operation.name"); op.Str() != "invoke_agent" || !delegated {
						continue
					}
					placed++
					assert.Equal(t, parts[1], s.TraceID().String(), "%s: the child's run %s is in the parent's trace", r.label(), s.Name())
					under := []string{parts[2]}
					if _, span, ok := runtrace.ParseTraceparent(parentRun); ok && r.hook == hookOnly {
						// The parent's batches can reach the connector after
						// the child's run ended: it is then under the parent's
						// run, which the child's session.started names.
						under = append(under, hex.EncodeToString(span[:]))
					}
					assert.Contains(t, under, s.ParentSpanID().String(), "%s: the child's run %s is under the delegating call", r.label(), s.Name())
				}
			}
		}
	}
	assert.NotZero(t, agreed, "%s: the child's spans", r.label())
	if delegated {
		assert.Equal(t, len(childRuns), placed, "%s: every run of the child is a span", r.label())
	} else {
		t.Logf("%s: the child's session.started names no parent run: its runs are traces of their own", r.label())
	}
}
