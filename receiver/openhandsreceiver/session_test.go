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
	"strconv"
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
	require.NotContains(t, types(r.emitted(t)), "run.finished")
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

			got := types(rig.emitted(t))
			require.Equal(t, tc.typ, got[len(got)-1], "%s emits %s last: %v", tc.name, tc.typ, got)
			finished, door := slices.Index(got, "run.finished"), len(got)-1
			require.NotEqual(t, -1, finished, "the held run.finished leaves before %s: %v", tc.typ, got)
			assert.Less(t, finished, door, "%v", got)
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

// TestSessionEmitsInQueueOrder: what a session emits takes its (epoch,
// seq) in the order it was queued, contiguous from the first, whichever
// door it came by; a stored event redelivered at or below the cursor is
// a duplicate and emits nothing.
func TestSessionEmitsInQueueOrder(t *testing.T) {
	ctx := context.Background()
	rig := newSessionRig(t, nil)
	s := rig.open(t, freshState(7))
	s.begin(ctx, "2026-07-12T09:00:00Z")
	rig.feed(ctx, s, statusEvent(t, "s1", 0, "running"), actionEvent(t, "a1", 1000, "call_1", "resp-1"))
	s.noteMetadata(ctx, "2026-07-12T10:00:01Z", metadata{Title: json.RawMessage(`"a title"`)})
	rig.feed(ctx, s, statusEvent(t, "s2", 2000, "finished"))
	emitted := len(rig.emitted(t))
	s.handleDurable(ctx, 1, 1, actionEvent(t, "a1", 1000, "call_1", "resp-1"), nil)
	s.flush(ctx)
	assert.Len(t, rig.emitted(t), emitted, "a redelivery emits nothing")
	s.end(ctx)

	events := rig.emitted(t)
	got := types(events)
	require.Equal(t, "session.started", got[0])
	require.Equal(t, "session.ended", got[len(got)-1])
	assert.Less(t, slices.Index(got, "run.started"), slices.Index(got, "tool.requested"))
	assert.Less(t, slices.Index(got, "tool.requested"), slices.Index(got, "run.finished"))
	for i, ev := range events {
		require.NotNil(t, ev.Seq)
		assert.Equal(t, int64(i), *ev.Seq, "%s", ev.Type)
		assert.Equal(t, int64(7), *ev.Epoch, "%s", ev.Type)
	}
}

// TestSessionRestoresFromDurableState: a session built on the state the
// last one stored, as a restart builds it, goes on where it stopped: the
// socket cursor, the next seq, the open run, and a run.finished the
// decorator held for its usage, which the usage completes.
func TestSessionRestoresFromDurableState(t *testing.T) {
	ctx := context.Background()
	mem := newMemStorage(nil)
	first := newSessionRig(t, mem)
	s := first.open(t, freshState(1))
	first.holdRunFinished(t, s)
	s.detached(ctx) // an orderly stop: the pipeline took every batch
	before := first.emitted(t)

	stored := first.set.journal.loadConversation(ctx, testSessionID)
	require.NoError(t, stored.err)
	assert.Nil(t, stored.pending, "an orderly stop leaves no batch to send again")
	require.NotEmpty(t, stored.state.Decoration.Held, "the held run.finished is stored")

	second := newSessionRig(t, mem) // the next process, on the same storage
	restored := second.open(t, stored.state)
	seq, id := restored.resumeCursor()
	assert.Equal(t, first.seq, seq)
	assert.Equal(t, "s2", id)
	second.seq = seq
	second.feed(ctx, restored, statsEvent(t, "st2", 2300, 250))

	after := second.emitted(t)
	require.NotEmpty(t, after)
	finished := after[0]
	require.Equal(t, "run.finished", finished.Type, "%v", types(after))
	assert.Equal(t, *before[len(before)-1].Seq+1, *finished.Seq, "seq goes on")
	assert.Equal(t, int64(1), *finished.Epoch)
	assert.Equal(t, before[slices.IndexFunc(before, func(ev *aep.Event) bool { return ev.Type == "run.started" })].Run, finished.Run)
	assert.Equal(t, json.Number("250"), finished.Data["gen_ai.usage.input_tokens"], "the run's usage, completed after the restart")
	assert.NotContains(t, types(after), "session.started")
}

// TestSessionWritesControlWhenChanged: a session's control notes are
// stored with its first write of its life, then only when they change:
// batches and saves that leave them as they were write the state and the
// batch alone.
func TestSessionWritesControlWhenChanged(t *testing.T) {
	ctx := context.Background()
	client := newCountingClient()
	s := gatedConversation(t, client).session
	s.begin(ctx, "2026-07-12T09:00:00Z")
	for i := range 5 {
		s.handleDurable(ctx, int64(i), 1, statusEvent(t, "s"+strconv.Itoa(i), i, []string{"running", "idle"}[i%2]), nil)
		s.flush(ctx)
	}
	require.NoError(t, s.Save(ctx))
	assert.Equal(t, 6, client.sets["batch"], "one write-ahead a batch")
	assert.Equal(t, 7, client.sets["state"], "the state with each batch, and the save")
	assert.Equal(t, 1, client.sets["control"], "the control notes, unchanged, are written once")

	s.mu.Lock()
	s.notes = nil // the gate's notes change: here, to none
	s.mu.Unlock()
	require.NoError(t, s.Save(ctx))
	assert.Equal(t, 2, client.sets["control"], "changed notes are written")
}
