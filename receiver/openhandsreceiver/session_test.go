package openhandsreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// The session type driven directly, without a server or a socket: what
// goes in through its methods, what the pipeline (a sink) and storage (a
// journal on memStorage) get.

const (
	testSessionID = "5f0e1d2c-3b4a-4958-8a7b-6c5d4e3f2a10"
	testChildID   = "7d1e2f30-4a5b-4c6d-8e9f-a0b1c2d3e4f5"
)

// sessionRig is one session with its pipeline and, when asked for, its
// storage.
type sessionRig struct {
	set  *sessionSettings
	sink *consumertest.LogsSink
	seq  int64 // the last /sockets/session seq fed
}

// newSessionRig makes the settings a server's sessions share as the
// receiver makes them, with storage on mem when mem is not nil.
func newSessionRig(t *testing.T, mem *memStorage) *sessionRig {
	t.Helper()
	sink := new(consumertest.LogsSink)
	r, err := newReceiver(createDefaultConfig().(*Config), receivertest.NewNopSettings(componentType), sink)
	require.NoError(t, err)
	set := r.newServerWatch(&serverClient{name: "test", hostPort: "127.0.0.1:1"}, 1).sessions
	if mem != nil {
		client, err := mem.GetClient(context.Background(), component.KindReceiver, component.NewID(componentType), "")
		require.NoError(t, err)
		set.journal = newJournal(client, "127.0.0.1:1")
	}
	return &sessionRig{set: set, sink: sink, seq: -1}
}

// open builds the session in state.
func (r *sessionRig) open(t *testing.T, state durableState) *session {
	t.Helper()
	s, err := newSession(r.set, testSessionID, mapping.Lineage{}, state)
	require.NoError(t, err)
	return s
}

// feed hands s the vendor events as its session socket delivers stored
// events, at the next seqs, and emits what they mapped to.
func (r *sessionRig) feed(ctx context.Context, s *session, events ...mapping.Event) {
	for _, ev := range events {
		r.seq++
		s.handleDurable(ctx, r.seq, 1, ev, nil)
	}
	s.flush(ctx)
}

// emitted is every AEP event the pipeline took, in order.
func (r *sessionRig) emitted(t *testing.T) []*aep.Event {
	return aeptest.EventsOf(t, r.sink.AllLogs()...)
}

func typesOf(events []*aep.Event) []string {
	types := make([]string, len(events))
	for i, ev := range events {
		types[i] = ev.Type
	}
	return types
}

// vendorAt is a vendor event of kind, ms milliseconds into the test's
// hour, decoded as the socket decodes it.
func vendorAt(t *testing.T, kind, id string, ms int, fields map[string]any) mapping.Event {
	t.Helper()
	f := map[string]any{"kind": kind, "id": id, "source": "environment",
		"timestamp": time.Date(2026, 7, 12, 10, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format("2006-01-02T15:04:05.000000")}
	for k, v := range fields {
		f[k] = v
	}
	raw, err := json.Marshal(f)
	require.NoError(t, err)
	ev, err := mapping.DecodeEvent(raw)
	require.NoError(t, err)
	return ev
}

func statusEvent(t *testing.T, id string, ms int, status string) mapping.Event {
	return vendorAt(t, "ConversationStateUpdateEvent", id, ms, map[string]any{"key": "execution_status", "value": status})
}

func statsEvent(t *testing.T, id string, ms, prompt int) mapping.Event {
	return vendorAt(t, "ConversationStateUpdateEvent", id, ms, map[string]any{"key": "stats", "value": map[string]any{
		"usage_to_metrics": map[string]any{"agent": map[string]any{
			"model_name": "fake", "accumulated_cost": 0.001,
			"accumulated_token_usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": 1},
		}},
	}})
}

func actionEvent(t *testing.T, id string, ms int, callID, responseID string) mapping.Event {
	return vendorAt(t, "ActionEvent", id, ms, map[string]any{
		"source": "agent", "tool_name": "terminal", "tool_call_id": callID, "llm_response_id": responseID,
		"action": map[string]any{"kind": "TerminalAction", "command": "ls"},
	})
}

// childLaunchEvent is the observation of a start_child_conversation call
// as the 1.58.2 server publishes it.
func childLaunchEvent(t *testing.T, id string, ms int) mapping.Event {
	return vendorAt(t, "ObservationEvent", id, ms, map[string]any{
		"tool_name": "start_child_conversation", "tool_call_id": "call-child", "action_id": "a-child",
		"observation": map[string]any{
			"kind":            "StartChildConversationObservation",
			"content":         []any{map[string]any{"type": "text", "text": "Started child conversation " + testChildID}},
			"conversation_id": testChildID, "parent_conversation_id": testSessionID, "status": "running",
			"is_error": false,
		},
	})
}

// holdRunFinished feeds s a run that announces a child and ends before
// the stats of its last LLM response: the decorator holds its
// run.finished for them.
func (r *sessionRig) holdRunFinished(t *testing.T, s *session) {
	t.Helper()
	ctx := context.Background()
	s.begin(ctx, "2026-07-12T09:00:00Z")
	r.feed(ctx, s,
		statusEvent(t, "s1", 0, "running"),
		actionEvent(t, "a1", 1000, "call_1", "resp-1"),
		statsEvent(t, "st1", 1100, 100),
		actionEvent(t, "a-child", 1500, "call-child", "resp-2"),
		childLaunchEvent(t, "o-child", 1600),
		statusEvent(t, "s2", 2200, "finished"),
	)
	require.True(t, s.decorator.Holding(), "the run.finished waits for its last response's stats")
	require.NotContains(t, typesOf(r.emitted(t)), "run.finished")
}

// TestSessionQueuesBehindHeldRunFinished: whatever enters a session's
// stream while the decorator holds a run.finished for its usage, by any
// of the session's doors, leaves after it (queueLocked). A child's stop
// once overtook it.
func TestSessionQueuesBehindHeldRunFinished(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		typ  string // what the door emits
		door func(s *session)
	}{
		{"a child's stop", "delegation.subagent.stopped", func(s *session) { s.childStatus(ctx, testChildID, "finished") }},
		{"a control ack", "control.accepted", func(s *session) {
			s.Control(ctx, func(*openhandscontrol.Notes) []*aep.Event {
				return []*aep.Event{s.mapper.NewEvent("control.accepted", time.Now(), "test")}
			})
		}},
		{"a title", "state.delta", func(s *session) {
			s.noteMetadata(ctx, "2026-07-12T10:00:03Z", metadata{Title: json.RawMessage(`"a title"`)})
		}},
		{"an undecodable frame", "x.openhands.frame.undecodable", func(s *session) {
			s.undecodable(ctx, mapping.UndecodableFrame, 12, errors.New("not JSON"))
			s.flush(ctx)
		}},
		{"an oversize event", "x.openhands.event.oversize", func(s *session) {
			s.oversize(100, mapping.Oversize{ID: "big", Kind: "MessageEvent", Size: 1 << 20, Limit: 1 << 10})
			s.flush(ctx)
		}},
		{"the session's end", "session.ended", func(s *session) { s.end(ctx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newSessionRig(t, nil)
			s := rig.open(t, freshState(1))
			rig.holdRunFinished(t, s)

			tc.door(s)

			types := typesOf(rig.emitted(t))
			require.Equal(t, tc.typ, types[len(types)-1], "%s emits %s last: %v", tc.name, tc.typ, types)
			finished, door := slices.Index(types, "run.finished"), len(types)-1
			require.NotEqual(t, -1, finished, "the held run.finished leaves before %s: %v", tc.typ, types)
			assert.Less(t, finished, door, "%v", types)
		})
	}
}

// TestSessionOneWayIn: the session's pending events grow in one place,
// queueLocked, which decorates them; an append anywhere else would skip
// the decorator. And every method of the session lives beside its type,
// in session*.go: nothing else takes its lock.
func TestSessionOneWayIn(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if onSession(fn) {
				assert.True(t, strings.HasPrefix(name, "session") && !strings.HasPrefix(name, "sessionframe"),
					"%s: method (*session).%s belongs beside the type, in session*.go", name, fn.Name.Name)
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				if callee, ok := call.Fun.(*ast.Ident); !ok || callee.Name != "append" {
					return true
				}
				if sel, ok := call.Args[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "mapped" && fn.Name.Name != "queueLocked" {
					t.Errorf("%s: %s appends to a session's pending events; only queueLocked may, through the decorator",
						fset.Position(call.Pos()), fn.Name.Name)
				}
				return true
			})
		}
	}
}

// onSession reports whether fn is a method of *session.
func onSession(fn *ast.FuncDecl) bool {
	if fn.Recv == nil || len(fn.Recv.List) != 1 {
		return false
	}
	star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == "session"
}
