package openhandsreceiver

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

var memStorageID = component.MustNewID("mem_storage")

// memStorage is a storage extension in memory. Every write-ahead (a
// storage batch that sets a pending batch) leaves a crash image: a copy of
// everything stored at that instant, which is what a kill -9 right after
// it would leave on disk.
type memStorage struct {
	mu     sync.Mutex
	data   map[string][]byte
	images []map[string][]byte
}

func newMemStorage(data map[string][]byte) *memStorage {
	m := &memStorage{data: maps.Clone(data)}
	if m.data == nil {
		m.data = make(map[string][]byte)
	}
	return m
}

func (m *memStorage) Start(context.Context, component.Host) error { return nil }
func (m *memStorage) Shutdown(context.Context) error              { return nil }
func (m *memStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return memClient{m}, nil
}

func (m *memStorage) extensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{memStorageID: m}
}

func (m *memStorage) snapshot() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.data)
}

func (m *memStorage) crashImages() []map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.images)
}

type memClient struct{ m *memStorage }

func (c memClient) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	err := c.Batch(ctx, op)
	return op.Value, err
}

func (c memClient) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c memClient) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}

func (c memClient) Batch(_ context.Context, ops ...*storage.Operation) error {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	writeAhead := false
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = slices.Clone(m.data[op.Key])
		case storage.Set:
			m.data[op.Key] = slices.Clone(op.Value)
			writeAhead = writeAhead || strings.HasSuffix(op.Key, "/batch")
		case storage.Delete:
			delete(m.data, op.Key)
		}
	}
	if writeAhead {
		m.images = append(m.images, maps.Clone(m.data))
	}
	return nil
}

func (memClient) Close(context.Context) error { return nil }

func storageConfig(socket string, stub *oh.Server) *Config {
	cfg := fastConfig(socket, stub)
	cfg.Storage = &memStorageID
	return cfg
}

// playRun plays a run with n tool calls and a confirmation on conv.
func playRun(t *testing.T, conv *oh.Conversation, n int) {
	t.Helper()
	_, err := conv.SendUserMessage("go", false)
	require.NoError(t, err)
	mustStatus(t, conv, oh.StatusRunning)
	for range n {
		act := mustAppend(t, conv, oh.TerminalAction("ls"))
		mustAppend(t, conv, oh.ObservationEvent(act, "ok", false))
	}
	mustStatus(t, conv, oh.StatusWaitingForConfirmation)
	mustStatus(t, conv, oh.StatusRunning)
	mustStatus(t, conv, oh.StatusFinished)
}

// checkStream feeds evs, in emission order, to the AEP stream checker
// (no collision, positions only ever move forward, one terminal per run)
// and the schemas.
func checkStream(t *testing.T, evs []*aep.Event) {
	t.Helper()
	var checker stream.Checker
	for _, ev := range evs {
		require.NoError(t, checker.Add(ev), "%s %s", ev.Type, ev.ID)
	}
}

// vendorEventsOnce checks that evs, deduplicated on (source, id) as every
// consumer does, carry each vendor event of conv exactly once per output
// type (TokenEvent aside).
func vendorEventsOnce(t *testing.T, evs []*aep.Event, conv *oh.Conversation) {
	t.Helper()
	outputs := map[string]map[string]int{} // vendor id → type → count
	seen := map[[2]string]bool{}
	for _, ev := range evs {
		vid, _ := ev.Data["vendor_event_id"].(string)
		if vid == "" || ev.Session != conv.ID() || seen[[2]string{ev.Source, ev.ID}] {
			continue
		}
		seen[[2]string{ev.Source, ev.ID}] = true
		if outputs[vid] == nil {
			outputs[vid] = map[string]int{}
		}
		outputs[vid][ev.Type]++
	}
	for _, ve := range conv.Events() {
		if ve.Kind() == oh.KindTokenEvent {
			continue
		}
		assert.NotEmpty(t, outputs[ve.ID()], "vendor event %s (%s) never emitted", ve.ID(), ve.Kind())
		for typ, n := range outputs[ve.ID()] {
			assert.Equal(t, 1, n, "vendor event %s mapped to %s %d times", ve.ID(), typ, n)
		}
	}
}

// sampleState is a conversation's state with every part filled in.
func sampleState() durableState {
	return durableState{
		position: position{Epoch: 7, NextSeq: 12},
		Cursor:   cursor{DurableSeq: 40, ResumeTS: "2026-07-12T10:15:00.123456", Recent: []string{"a", "b"}},
		Mapping:  mapping.State{Status: "running", Runs: 2, Run: "run:c:2", RunStartedID: "R", StartedID: "S"},
		Decoration: mapping.DecoratorState{
			Tools:        map[string]mapping.ToolCall{"call c1": {RequestedID: "T", At: "2026-07-12T10:15:00.1"}},
			RunStartedAt: "2026-07-12T10:14:00.5", RunBaseline: mapping.Stats{"agent": {PromptTokens: 3}},
			Stats:        mapping.Stats{"agent": {PromptTokens: 9, CompletionTokens: 2, Cost: 0.5, HasCost: true}},
			RunResponses: 2, LastResponse: "resp-2", RunStatsUpdates: 1,
			Held: []*aep.Event{{
				AEP: aep.Version, ID: "F", Type: "run.finished", Time: "2026-07-12T10:15:01.000Z", Source: "aep://h/agent/a/session/c",
				Agent: "a", Session: "c", Run: "run:c:2", Data: map[string]any{"duration_ms": json.Number("61000")},
			}},
		},
		Control: openhandscontrol.State{Decided: []openhandscontrol.Decision{{
			Source: "aep://ops", ID: "cmd-1", Reason: "refused",
			Ack: &aep.Event{
				AEP: aep.Version, ID: "A", Type: "control.rejected", Time: "2026-07-12T10:15:02.000Z", Source: "aep://h/agent/a/session/c",
				Agent: "a", Session: "c", Seq: aep.Int64(11), Epoch: aep.Int64(7), Cause: "cmd-1", Capture: aep.CaptureRedacted,
				Data: map[string]any{"reason": "refused", "detail": "its status is idle"},
			},
		}}},
	}
}

func TestStateEncoding(t *testing.T) {
	s := sampleState()
	raw, err := encodeState(s)
	require.NoError(t, err)
	got, err := decodeState(raw)
	require.NoError(t, err)
	s.Version = stateVersion
	assert.Equal(t, s, got)

	for name, raw := range map[string]string{
		"not json":       `{"v":1,`,
		"no version":     `{"epoch":1}`,
		"negative":       `{"v":1,"epoch":-1}`,
		"newer":          `{"v":99,"epoch":1}`,
		"wrong type":     `{"v":1,"epoch":"one"}`,
		"below a cursor": `{"v":1,"cursor":{"durable_seq":-2}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeState([]byte(raw))
			assert.Error(t, err)
		})
	}
	_, err = decodeState([]byte(`{"v":99}`))
	assert.ErrorIs(t, err, errStateVersion)
}

// TestStateOfEarlierReleasesDecodes: every release reads the conversation
// state every earlier release wrote (the README's upgrade promise).
// testdata/state/<release>.json is sampleState as that release encoded it,
// committed when it was cut and never rewritten.
func TestStateOfEarlierReleasesDecodes(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "state", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, fixtures)
	want := sampleState()
	want.Version = stateVersion
	for _, path := range fixtures {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			got, err := decodeState(raw)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestShardOfIsStable(t *testing.T) {
	// FNV-1a 64 of the dashed lowercase id, modulo count: values any
	// implementation of the documented hash reproduces.
	const id = "3f2c8a4e-1b7d-4c2e-9a51-0d6f7e8b9c10"
	assert.Equal(t, 0, shardOf(id, 3))
	assert.Equal(t, 2, shardOf(id, 5))
	assert.Equal(t, 4, shardOf("00000000-0000-0000-0000-000000000000", 5))
	assert.Equal(t, shardOf(id, 5), shardOf(strings.ToUpper(id), 5), "case does not matter")
	assert.Equal(t, shardOf(id, 5), shardOf(strings.ReplaceAll(id, "-", ""), 5), "the hex form lands on the same replica")
	assert.True(t, ShardConfig{Count: 1}.owns(id))
}

// runOnStorage runs a receiver with storage over one run of a new
// conversation with tools tool calls, then shuts it down.
func runOnStorage(t *testing.T, socket string, tools int) (*oh.Server, *oh.Conversation, *memStorage, *harness) {
	t.Helper()
	stub := startStub(t)
	conv := createConversation(t, stub)
	mem := newMemStorage(nil)
	h := startHarnessWith(t, storageConfig(socket, stub), mem.extensions())
	h.waitLive(conv, 1)
	playRun(t, conv, tools)
	h.waitTypes(conv.ID(), "state.delta", "run.finished")
	require.NoError(t, h.rcv.Shutdown(context.Background()))
	return stub, conv, mem, h
}

// TestRestartResumesFromStorage stops the receiver mid-run, lets the run
// go on, and starts another receiver on the same storage: it resumes the
// same session (source, epoch) from the cursor, with nothing re-emitted
// and nothing skipped.
func TestRestartResumesFromStorage(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub, conv, mem, h1 := runOnStorage(t, socket, 3)

		playRun(t, conv, 2) // while no receiver watches
		h2 := startHarnessWith(t, storageConfig(socket, stub), mem.extensions())
		h2.waitTypes(conv.ID(), "state.delta", "run.finished")
		h2.waitLive(conv, 1)

		before, after := h1.session(conv.ID()), h2.session(conv.ID())
		all := append(before, after...)
		checkStream(t, all)
		vendorEventsOnce(t, all, conv)
		for i, ev := range all {
			assert.Equal(t, before[0].Source, ev.Source, "one session across the restart")
			assert.Equal(t, *before[0].Epoch, *ev.Epoch, "the epoch is unchanged")
			assert.Equal(t, int64(i), *ev.Seq, "positions continue without a gap or a repeat")
		}
		assert.Equal(t, 1, count(all, "session.started"))
		assert.Equal(t, 2, count(all, "run.started"))
		assert.Equal(t, "run:"+conv.ID()+":2", last(after, "run.started").Run, "the run counter survived")
	})
}

// TestCrashResendsPendingBatchByteForByte restarts from what a kill -9
// right after each write-ahead would leave: the batch written ahead is
// sent again exactly as it was first handed on, then the receiver reads
// on from the cursor stored with it.
func TestCrashResendsPendingBatchByteForByte(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub, conv, mem, h1 := runOnStorage(t, socket, 2)

		sent := h1.sink.AllLogs()
		images := mem.crashImages()
		assert.Positive(t, h1.metric("otelcol_openhands_storage_written", "", ""))
		assert.Zero(t, h1.metric("otelcol_openhands_batches_resent", "", ""))
		require.Len(t, images, len(sent), "one write-ahead per batch handed on")
		for _, k := range []int{0, len(sent) / 2, len(sent) - 1} {
			h2 := startHarnessWith(t, storageConfig(socket, stub), newMemStorage(images[k]).extensions())
			h2.waitTypes(conv.ID(), "state.delta", "run.finished")
			require.NoError(t, h2.rcv.Shutdown(context.Background()))

			resent := h2.sink.AllLogs()
			require.NotEmpty(t, resent)
			assert.Equal(t, int64(1), h2.metric("otelcol_openhands_batches_resent", "", ""))
			assert.Equal(t, protoBytes(t, sent[k]), protoBytes(t, resent[0]), "crash after write-ahead %d: the pending batch is re-sent byte for byte", k)

			// The world where the first receiver died there: what it sent up
			// to that batch, then everything the second one sent.
			var world []*aep.Event
			for _, logs := range append(slices.Clone(sent[:k+1]), resent...) {
				world = append(world, aeptest.EventsOf(t, logs)...)
			}
			checkStream(t, world)
			vendorEventsOnce(t, world, conv)
		}
	})
}

// TestRestartWithoutStorageIsANewSession: without storage a restart maps
// the whole history again, as a new session whose source names the new
// generation, so nothing it emits collides with the old session.
func TestRestartWithoutStorageIsANewSession(t *testing.T) {
	stub := startStub(t)
	conv := createConversation(t, stub)
	h1 := startHarness(t, fastConfig(socketSession, stub))
	h1.waitLive(conv, 1)
	playRun(t, conv, 2)
	h1.waitTypes(conv.ID(), "state.delta", "run.finished")
	require.NoError(t, h1.rcv.Shutdown(context.Background()))

	h2 := startHarness(t, fastConfig(socketSession, stub))
	h2.waitTypes(conv.ID(), "state.delta", "run.finished")
	before, after := h1.session(conv.ID()), h2.session(conv.ID())
	assert.NotEqual(t, before[0].Source, after[0].Source)
	assert.Greater(t, *after[0].Epoch, *before[0].Epoch)
	checkStream(t, append(before, after...))
	vendorEventsOnce(t, after, conv)
	assert.Equal(t, "run:"+conv.ID()+":1", last(after, "run.finished").Run, "the new session recounts the runs")
}

// TestUnreadableStateStartsFresh corrupts one conversation's state: it
// starts fresh in a new session, the other resumes, the receiver runs on.
func TestUnreadableStateStartsFresh(t *testing.T) {
	stub := startStub(t)
	broken, intact := createConversation(t, stub), createConversation(t, stub)
	mem := newMemStorage(nil)
	h1 := startHarnessWith(t, storageConfig(socketSession, stub), mem.extensions())
	h1.waitLive(broken, 1)
	h1.waitLive(intact, 1)
	require.NoError(t, h1.rcv.Shutdown(context.Background()))

	data := mem.snapshot()
	key := "openhands/" + stub.Addr() + "/conversation/" + broken.ID() + "/state"
	require.Contains(t, data, key)
	data[key] = []byte(`{"v":1,"epoch":`)
	h2 := startHarnessWith(t, storageConfig(socketSession, stub), newMemStorage(data).extensions())
	playRun(t, broken, 1)
	playRun(t, intact, 1)
	h2.waitTypes(broken.ID(), "state.delta", "run.finished")
	h2.waitTypes(intact.ID(), "state.delta", "run.finished")

	assert.Equal(t, int64(1), h2.metric("otelcol_openhands_storage_errors", "", ""))
	assert.NotEqual(t, h1.session(broken.ID())[0].Source, h2.session(broken.ID())[0].Source, "a fresh session")
	assert.Equal(t, "session.started", h2.session(broken.ID())[0].Type)
	assert.Equal(t, h1.session(intact.ID())[0].Source, h2.session(intact.ID())[0].Source, "the intact one resumes")
	assert.Zero(t, count(h2.session(intact.ID()), "session.started"))
	checkStream(t, append(h1.events(), h2.events()...))
}

// TestShardSplitsConversations runs three replicas on one server: every
// conversation has exactly one observer. Then two replicas take over with
// count 2, each on its predecessor's storage: a conversation that stays on
// its replica resumes its session, one that moves starts a new session on
// its new owner, and nothing collides.
func TestShardSplitsConversations(t *testing.T) {
	stub := startStub(t)
	var convs []*oh.Conversation
	for range 24 {
		convs = append(convs, createConversation(t, stub))
	}
	mems := []*memStorage{newMemStorage(nil), newMemStorage(nil), newMemStorage(nil)}
	replicas := func(count int) []*harness {
		var hs []*harness
		for i := range count {
			cfg := storageConfig(socketSession, stub)
			cfg.Shard = ShardConfig{Index: &i, Count: count}
			hs = append(hs, startHarnessWith(t, cfg, mems[i].extensions()))
		}
		return hs
	}
	observers := func(hs []*harness, conv *oh.Conversation) []int {
		var out []int
		for i, h := range hs {
			if len(h.session(conv.ID())) > 0 {
				out = append(out, i)
			}
		}
		return out
	}

	three := replicas(3)
	for _, conv := range convs {
		three[shardOf(conv.ID(), 3)].waitLive(conv, 1)
	}
	for _, conv := range convs {
		assert.Equal(t, []int{shardOf(conv.ID(), 3)}, observers(three, conv), "conversation %s", conv.ID())
	}
	var all []*aep.Event
	for _, h := range three {
		require.NoError(t, h.rcv.Shutdown(context.Background()))
		all = append(all, h.events()...)
	}

	two := replicas(2)
	for _, conv := range convs {
		playRun(t, conv, 1)
	}
	moved := 0
	for _, conv := range convs {
		was, now := shardOf(conv.ID(), 3), shardOf(conv.ID(), 2)
		got := two[now].waitTypes(conv.ID(), "state.delta", "run.finished")
		assert.Equal(t, []int{now}, observers(two, conv), "conversation %s", conv.ID())
		old := three[was].session(conv.ID())[0].Source
		if was == now {
			assert.Equal(t, old, got[0].Source, "conversation %s stays: same session", conv.ID())
		} else {
			moved++
			assert.NotEqual(t, old, got[0].Source, "conversation %s moves: a new session", conv.ID())
			assert.Equal(t, "session.started", got[0].Type)
		}
	}
	assert.Positive(t, moved)
	for _, h := range two {
		all = append(all, h.events()...)
	}
	checkStream(t, all)
}

func protoBytes(t *testing.T, logs plog.Logs) []byte {
	t.Helper()
	raw, err := (&plog.ProtoMarshaler{}).MarshalLogs(logs)
	require.NoError(t, err)
	return raw
}

// TestOverlapIDsPersistTheResumeWindow: the ids persisted with a cursor
// are those a resume can present again; older ones are forgotten, so the
// list stays as small as the window.
func TestOverlapIDsPersistTheResumeWindow(t *testing.T) {
	o := newOverlapIDs()
	o.add("old", "2026-07-12T10:00:00.000001")
	o.add("edge", "2026-07-12T10:00:05")
	o.add("new", "2026-07-12T10:00:10")
	o.add("unstamped", "")
	assert.Equal(t, []string{"edge", "new", "unstamped"}, o.ids(), "an unstamped id counts as the newest")
	o.retire("new")
	assert.Equal(t, []string{"edge", "unstamped"}, o.ids())
}
