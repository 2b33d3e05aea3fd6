//go:build live

package livetest

import (
	"context"
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
func TestLiveTree(t *testing.T) {
	l := startLive(t, []string{"events", "session"})
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
	t.Logf("the tree (parent, child, fork) took %s on the server", time.Since(started).Round(time.Second))

	truth := map[string][]map[string]any{}
	for id := range l.names {
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
					for _, p := range coverage(evs, r.sessionEvents(id), false) {
						problems = append(problems, l.names[id]+": "+p)
					}
				}
			}
			problems = append(problems, treeProblems(r, parent, child, fork.ID, launch)...)
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
		for _, v := range r.relay.Violations() {
			t.Errorf("%s relay violation: %s", r.label(), v)
		}
		assertReadOnly(t, r.rec.Transcript())
	}
	for _, c := range l.cols {
		require.True(t, c.Running(), "a collector exited:\n%s", tail(c.logText(), 4000))
	}
	t.Logf("the tree took %s in all", time.Since(started).Round(time.Second))
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
// it, to the aep connector: the child's runs must be spans under the
// parent's start_child_conversation call span, in its trace.
func assertDelegatedTrace(t *testing.T, r *receiverUnderTest, parent, child string) {
	f := aepconnector.NewFactory()
	sink := new(consumertest.TracesSink)
	conn, err := f.CreateLogsToTraces(context.Background(), connectortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	var call string
	childRuns := map[string]bool{}
	for _, rec := range r.relay.Events() {
		ev := rec.Event
		switch {
		case ev.Session == parent && ev.Type == "tool.completed" && ev.Subject == startChildTool:
			call = ev.Traceparent
		case ev.Session == child && ev.Run != "":
			childRuns[ev.Run] = true
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
	placed := 0
	for _, td := range sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					run, _ := s.Attributes().Get("aep.run_id")
					op, _ := s.Attributes().Get("gen_ai.operation.name")
					if !childRuns[run.Str()] || op.Str() != "invoke_agent" {
						continue
					}
					placed++
					assert.Equal(t, parts[1], s.TraceID().String(), "%s: the child's run %s is in the parent's trace", r.label(), s.Name())
					assert.Equal(t, parts[2], s.ParentSpanID().String(), "%s: the child's run %s is under the delegating call", r.label(), s.Name())
				}
			}
		}
	}
	assert.Equal(t, len(childRuns), placed, "%s: every run of the child is a span", r.label())
}
