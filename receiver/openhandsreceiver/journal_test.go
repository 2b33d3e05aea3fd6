package openhandsreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// recordingStorage is memStorage that also records every storage batch
// the receiver sends, as the keys of its operations by type.
type recordingStorage struct {
	*memStorage
	mu      sync.Mutex
	batches []recordedBatch
}

type recordedBatch struct {
	gets, sets, deletes []string
}

func newRecordingStorage(data map[string][]byte) *recordingStorage {
	return &recordingStorage{memStorage: newMemStorage(data)}
}

func (r *recordingStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return recordingClient{memClient{r.memStorage}, r}, nil
}

func (r *recordingStorage) extensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{memStorageID: r}
}

func (r *recordingStorage) recorded() []recordedBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

type recordingClient struct {
	memClient
	r *recordingStorage
}

func (c recordingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	var b recordedBatch
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			b.gets = append(b.gets, op.Key)
		case storage.Set:
			b.sets = append(b.sets, op.Key)
		case storage.Delete:
			b.deletes = append(b.deletes, op.Key)
		}
	}
	c.r.mu.Lock()
	c.r.batches = append(c.r.batches, b)
	c.r.mu.Unlock()
	return c.memClient.Batch(ctx, ops...)
}

// keysOf returns the stored keys that name conversation id.
func keysOf(data map[string][]byte, id string) []string {
	var out []string
	for key := range data {
		if strings.Contains(key, "/conversation/"+id+"/") {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// indexOf decodes every index bucket stored for the server at hostPort.
func indexOf(t *testing.T, data map[string][]byte, hostPort string) (live, ended []string) {
	t.Helper()
	for key, raw := range data {
		if !strings.HasPrefix(key, "openhands/"+hostPort+"/conversations/") {
			continue
		}
		var index journalIndex
		require.NoError(t, json.Unmarshal(raw, &index), key)
		live, ended = append(live, index.IDs...), append(ended, index.Ended...)
	}
	return live, ended
}

// watchOnStorage starts a receiver on the storage in extensions and waits
// until each of convs is live.
func watchOnStorage(t *testing.T, stub *oh.Server, extensions map[component.ID]component.Component, convs ...*oh.Conversation) *harness {
	t.Helper()
	h := startHarnessWith(t, storageConfig(socketSession, stub), extensions)
	for _, conv := range convs {
		h.waitLive(conv, 1)
	}
	return h
}

// TestEndedConversationLeavesStorage: once a conversation deleted on the
// server has its session.ended handed on, its state, its batch and its
// index entry leave storage in one storage batch; the other stays. A
// restart on that storage still knows the conversation ended: shown
// again, it gets no second session.
func TestEndedConversationLeavesStorage(t *testing.T) {
	stub := startStub(t)
	gone, kept := createConversation(t, stub), createConversation(t, stub)
	rec := newRecordingStorage(nil)
	h := watchOnStorage(t, stub, rec.extensions(), gone, kept)
	require.NotEmpty(t, keysOf(rec.snapshot(), gone.ID()))

	_, err := gone.SetStatus(oh.StatusDeleting)
	require.NoError(t, err)
	h.waitTypes(gone.ID(), "session.ended")
	require.Eventually(t, func() bool { return len(keysOf(rec.snapshot(), gone.ID())) == 0 }, waitFor, tick,
		"the ended conversation leaves storage")
	require.NoError(t, h.rcv.Shutdown(context.Background()))

	data := rec.snapshot()
	live, ended := indexOf(t, data, stub.Addr())
	assert.Equal(t, []string{kept.ID()}, live)
	assert.Equal(t, []string{gone.ID()}, ended, "remembered as recently ended")
	assert.NotEmpty(t, keysOf(data, kept.ID()))
	removals := slices.DeleteFunc(rec.recorded(), func(b recordedBatch) bool { return len(b.deletes) == 0 })
	prefix := "openhands/" + stub.Addr() + "/"
	assert.Contains(t, removals, recordedBatch{
		deletes: []string{
			prefix + "conversation/" + gone.ID() + "/state", prefix + "conversation/" + gone.ID() + "/control",
			prefix + "conversation/" + gone.ID() + "/batch",
		},
		sets: []string{fmt.Sprintf("%sconversations/%02x", prefix, bucketOf(gone.ID()))},
	}, "state, control state, batch and index entry go in one storage batch")

	_, err = gone.SetStatus(oh.StatusIdle) // a server showing it again
	require.NoError(t, err)
	h2 := startHarnessWith(t, storageConfig(socketSession, stub), newMemStorage(data).extensions())
	playRun(t, kept, 1)
	h2.waitTypes(kept.ID(), "state.delta", "run.finished")
	assert.Empty(t, h2.session(gone.ID()), "an ended conversation shown again gets no second session")
}

// TestCrashBeforeEndedConversationLeavesStorage restarts from what a kill
// -9 right after the session.ended's write-ahead would leave: the
// session.ended is sent again, no session starts, and the conversation
// leaves storage then.
func TestCrashBeforeEndedConversationLeavesStorage(t *testing.T) {
	stub := startStub(t)
	conv := createConversation(t, stub)
	mem := newMemStorage(nil)
	h1 := watchOnStorage(t, stub, mem.extensions(), conv)
	require.NoError(t, conv.Delete())
	h1.waitTypes(conv.ID(), "session.ended")
	require.NoError(t, h1.rcv.Shutdown(context.Background()))
	images := mem.crashImages()
	crashed := images[len(images)-1] // the write-ahead of the session.ended
	require.NotEmpty(t, keysOf(crashed, conv.ID()))

	rec := newRecordingStorage(crashed)
	h2 := startHarnessWith(t, storageConfig(socketSession, stub), rec.extensions())
	got := h2.waitTypes(conv.ID(), "session.ended")
	require.Eventually(t, func() bool { return len(keysOf(rec.snapshot(), conv.ID())) == 0 }, waitFor, tick)
	assert.Equal(t, []string{"session.ended"}, types(got), "sent again, and nothing else")
	assert.Equal(t, int64(1), h2.metric("otelcol_openhands_batches_resent", "", ""))
	assert.Equal(t, last(h1.session(conv.ID()), "session.ended").ID, got[0].ID, "the same session.ended")
	_, ended := indexOf(t, rec.snapshot(), stub.Addr())
	assert.Equal(t, []string{conv.ID()}, ended)
}

// TestStartBuildsOnlyWhatDiscoveryShows: a start reads the index and the
// pending batches, and no conversation's state before discovery shows the
// conversation. Then the one the server still has resumes its session,
// and the one deleted while the receiver was down ends it and leaves
// storage.
func TestStartBuildsOnlyWhatDiscoveryShows(t *testing.T) {
	stub := startStub(t)
	live, deleted := createConversation(t, stub), createConversation(t, stub)
	mem := newMemStorage(nil)
	h1 := watchOnStorage(t, stub, mem.extensions(), live, deleted)
	require.NoError(t, h1.rcv.Shutdown(context.Background()))
	require.NoError(t, deleted.Delete())

	stub.SetConversationSearchFault(oh.SearchServerError)
	rec := newRecordingStorage(mem.snapshot())
	h2 := startHarnessWith(t, storageConfig(socketSession, stub), rec.extensions())
	searched := func() bool {
		return slices.ContainsFunc(stub.Requests(), func(r oh.Request) bool { return r.Path == "/api/conversations/search" })
	}
	require.Eventually(t, searched, waitFor, tick)
	for _, b := range rec.recorded() {
		for _, key := range b.gets {
			assert.False(t, strings.HasSuffix(key, "/state"), "read %s before discovery showed it", key)
		}
	}

	stub.SetConversationSearchFault(oh.SearchOK)
	playRun(t, live, 1)
	resumed := h2.waitTypes(live.ID(), "state.delta", "run.finished")
	assert.Equal(t, h1.session(live.ID())[0].Source, resumed[0].Source, "the same session")
	assert.Zero(t, count(resumed, "session.started"))
	ended := h2.waitTypes(deleted.ID(), "session.ended")
	assert.Equal(t, []string{"session.ended"}, types(ended))
	assert.Equal(t, h1.session(deleted.ID())[0].Source, ended[0].Source, "the same session ends")
	require.Eventually(t, func() bool { return len(keysOf(rec.snapshot(), deleted.ID())) == 0 }, waitFor, tick)
	checkStream(t, append(h1.events(), h2.events()...))
}

// TestIndexIsBucketed: each index bucket holds only the ids that hash to
// it, so a new conversation rewrites 1/256 of the index however many
// there are.
func TestIndexIsBucketed(t *testing.T) {
	mem := newMemStorage(nil)
	j := newJournal(memClient{mem}, "h:1")
	for i := range 1000 {
		_, err := j.writeAhead(context.Background(), fmt.Sprintf("c%04d", i), durableState{}, nil, []byte("batch"))
		require.NoError(t, err)
	}
	data := mem.snapshot()
	live, _ := indexOf(t, data, "h:1")
	assert.Len(t, live, 1000)
	for n := range indexBuckets {
		var index journalIndex
		require.NoError(t, json.Unmarshal(data[j.bucketKey(n)], &index))
		for _, id := range index.IDs {
			assert.Equal(t, n, bucketOf(id), "%s in bucket %02x", id, n)
		}
		assert.Less(t, len(index.IDs), 20, "bucket %02x holds about 1000/256 ids", n)
	}
	assert.NotContains(t, data, j.legacyIndexKey())
}

// TestSingleIndexIsSplitAtStart: the single index of an older release is
// read at start and split into buckets: its conversations resume.
func TestSingleIndexIsSplitAtStart(t *testing.T) {
	stub, conv, mem, h1 := runOnStorage(t, socketSession, 1)
	data := mem.snapshot()
	live, _ := indexOf(t, data, stub.Addr())
	require.Equal(t, []string{conv.ID()}, live)
	prefix := "openhands/" + stub.Addr() + "/"
	for key := range data {
		if strings.HasPrefix(key, prefix+"conversations/") {
			delete(data, key)
		}
	}
	data[prefix+"conversations"] = fmt.Appendf(nil, `{"v":1,"ids":[%q]}`, conv.ID())

	rec := newRecordingStorage(data)
	h2 := startHarnessWith(t, storageConfig(socketSession, stub), rec.extensions())
	playRun(t, conv, 1)
	resumed := h2.waitTypes(conv.ID(), "state.delta", "run.finished")
	assert.Equal(t, h1.session(conv.ID())[0].Source, resumed[0].Source, "the same session")
	assert.Zero(t, count(resumed, "session.started"))
	upgraded := rec.snapshot()
	assert.NotContains(t, upgraded, prefix+"conversations", "the single index is gone")
	live, _ = indexOf(t, upgraded, stub.Addr())
	assert.Equal(t, []string{conv.ID()}, live)
}

// TestEndedIDsPerBucketAreBounded: a bucket remembers only its
// endedPerBucket most recently ended ids, so storage does not grow with
// every conversation that ever ended.
func TestEndedIDsPerBucketAreBounded(t *testing.T) {
	ctx := context.Background()
	mem := newMemStorage(nil)
	j := newJournal(memClient{mem}, "h:1")
	var ids []string
	for i := 0; len(ids) < endedPerBucket+3; i++ {
		if id := fmt.Sprintf("c%05d", i); bucketOf(id) == 0 {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		_, err := j.writeAhead(ctx, id, durableState{}, nil, []byte("batch"))
		require.NoError(t, err)
		require.NoError(t, j.forget(ctx, id))
	}
	index, err := newJournal(memClient{mem}, "h:1").load(ctx)
	require.NoError(t, err)
	assert.Empty(t, index.live)
	assert.Equal(t, ids[len(ids)-endedPerBucket:], index.ended, "the newest, oldest first")
}

// failOnceClient fails the next storage batch once fail is set.
type failOnceClient struct {
	memClient
	fail *bool
}

func (c failOnceClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if *c.fail {
		*c.fail = false
		return errors.New("storage down")
	}
	return c.memClient.Batch(ctx, ops...)
}

// TestFailedIndexWriteLeavesTheIndexAsStored: a write that storage refused
// changes nothing in the index the journal keeps in memory, so the next
// write of the bucket stores what storage holds: a new conversation whose
// write-ahead failed is not indexed (its retry indexes it), an ended one
// whose removal failed stays indexed (its state is still stored) and is
// not listed as ended.
func TestFailedIndexWriteLeavesTheIndexAsStored(t *testing.T) {
	ctx := context.Background()
	var sameBucket []string
	for i := 0; len(sameBucket) < 2; i++ {
		if id := fmt.Sprintf("c%05d", i); bucketOf(id) == 0 {
			sameBucket = append(sameBucket, id)
		}
	}
	id, sibling := sameBucket[0], sameBucket[1]
	writeAhead := func(j *journal) error {
		_, err := j.writeAhead(ctx, id, durableState{}, nil, []byte("batch"))
		return err
	}
	for _, tc := range []struct {
		name     string
		before   func(j *journal) error // storage takes it
		refused  func(j *journal) error // storage refuses it
		wantLive []string
	}{
		{name: "write-ahead of a new conversation", before: func(*journal) error { return nil }, refused: writeAhead, wantLive: []string{sibling}},
		{name: "removal of an ended conversation", before: writeAhead, refused: func(j *journal) error { return j.forget(ctx, id) }, wantLive: []string{id, sibling}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, fail := newMemStorage(nil), false
			j := newJournal(failOnceClient{memClient{mem}, &fail}, "h:1")
			require.NoError(t, tc.before(j))
			fail = true
			require.Error(t, tc.refused(j))
			_, err := j.writeAhead(ctx, sibling, durableState{}, nil, []byte("batch"))
			require.NoError(t, err)
			live, ended := indexOf(t, mem.snapshot(), "h:1")
			slices.Sort(live)
			assert.Equal(t, tc.wantLive, live)
			assert.Empty(t, ended)
		})
	}
}

// countingClient is memClient counting the bytes (keys and values) each
// key suffix is written with.
type countingClient struct {
	memClient
	mu      sync.Mutex
	written map[string]int // by the key's last path element
	sets    map[string]int
}

func newCountingClient() *countingClient {
	return &countingClient{memClient: memClient{newMemStorage(nil)}, written: map[string]int{}, sets: map[string]int{}}
}

func (c *countingClient) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c *countingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	c.mu.Lock()
	for _, op := range ops {
		if op.Type == storage.Set {
			kind := op.Key[strings.LastIndex(op.Key, "/")+1:]
			c.written[kind] += len(op.Key) + len(op.Value)
			c.sets[kind]++
		}
	}
	c.mu.Unlock()
	return c.memClient.Batch(ctx, ops...)
}

// total is the bytes written under every key.
func (c *countingClient) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.written {
		n += w
	}
	return n
}

// gatedConversation is a conversation with storage on client and an open
// control gate, restored with keptDecisions recorded acks: the most
// control state a conversation carries.
func gatedConversation(tb testing.TB, client storage.Client) *conversation {
	tb.Helper()
	ext, _ := startOpenGate(tb)
	r, err := newReceiver(createDefaultConfig().(*Config), receivertest.NewNopSettings(componentType), consumertest.NewNop())
	require.NoError(tb, err)
	r.storage = client
	var unregister func()
	r.newNotes, unregister = ext.(openhandscontrol.Registrar).Register(r.sessions)
	tb.Cleanup(unregister)
	base, err := url.Parse("http://127.0.0.1:8000")
	require.NoError(tb, err)
	w := r.newServerWatch(&serverClient{name: "offline", base: base, hostPort: "127.0.0.1:8000"}, 1)

	id := oh.NewUUID()
	state := freshState(1)
	for i := range 64 {
		seq := int64(i)
		ack := &aep.Event{
			AEP: aep.Version, ID: oh.NewUUID(), Type: "control.accepted", Time: "2026-12-02T09:00:00.000000Z",
			Source: "aep://openhands/127.0.0.1:8000/" + id, Agent: "openhands", Session: id, Seq: &seq, Epoch: &state.Epoch,
			Cause: oh.NewUUID(), Severity: aep.SeverityInfo,
		}
		state.Control.Decided = append(state.Control.Decided, openhandscontrol.Decision{Source: "aep://ops", ID: ack.Cause, Ack: ack})
	}
	c, err := w.open(conversationInfo{ID: id}, &state)
	require.NoError(tb, err)
	return c
}

// emitEvents has c emit n stored events, one batch each.
func emitEvents(c *conversation, n int) {
	ctx := context.Background()
	for i := range n {
		frame := `{"type":"durable","seq":` + strconv.Itoa(i) + `,"event":` + string(historyEvent(1, i)) + `}`
		c.receive(ctx, c.handleSessionFrame, []byte(frame), false)
	}
}

// TestControlStateIsWrittenWhenItChanges: a conversation's control state
// (here 64 recorded acks) is written with its first batch, then only when
// the gate changes it, not with every batch.
func TestControlStateIsWrittenWhenItChanges(t *testing.T) {
	client := newCountingClient()
	c := gatedConversation(t, client)
	emitEvents(c, 40)
	assert.Equal(t, 40, client.sets["batch"], "one write-ahead a batch")
	assert.Equal(t, 1, client.sets["control"], "the control state, unchanged, is written once")

	// Restored, the control state is the one written.
	j := newJournal(client, "127.0.0.1:8000")
	s := j.loadConversation(context.Background(), c.id)
	require.NoError(t, s.err)
	assert.Len(t, s.state.Control.Decided, 64)
}

// BenchmarkWriteAheadBytes measures the bytes written to storage per
// event of a gated conversation holding 64 recorded acks, one event a
// batch (the worst case: a live conversation's events arrive one by one).
func BenchmarkWriteAheadBytes(b *testing.B) {
	client := newCountingClient()
	c := gatedConversation(b, client)
	emitEvents(c, 1) // the first write-ahead writes the control state
	start := client.total()
	b.ResetTimer()
	emitEvents(c, b.N)
	b.ReportMetric(float64(client.total()-start)/float64(b.N), "storage-B/event")
}

// TestControlStateOfAnOlderReleaseMovesToItsKey: a state stored by a
// release that kept the control state inline is read with it, and the
// first batch writes it under its own key, as the state written with it
// no longer holds it.
func TestControlStateOfAnOlderReleaseMovesToItsKey(t *testing.T) {
	ctx := context.Background()
	client := newCountingClient()
	c := gatedConversation(t, client)
	_, control := c.session.snapshotLocked()
	j := newJournal(client, "127.0.0.1:8000")
	older := freshState(1)
	older.Control = control
	raw, err := encodeState(older)
	require.NoError(t, err)
	require.NoError(t, client.Set(ctx, j.stateKey(c.id), raw))

	s := j.loadConversation(ctx, c.id)
	require.NoError(t, s.err)
	require.Len(t, s.state.Control.Decided, 64, "read inline")
	emitEvents(c, 1)
	stored, err := client.Get(ctx, j.stateKey(c.id))
	require.NoError(t, err)
	assert.NotContains(t, string(stored), `"control"`)
	s = j.loadConversation(ctx, c.id)
	require.NoError(t, s.err)
	assert.Len(t, s.state.Control.Decided, 64, "read from its key")
}
