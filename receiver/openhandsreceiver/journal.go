package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
)

// journal is one agent server's part of the receiver's storage. Per
// conversation it holds the durable state and, while a batch is on its way
// to the pipeline, that batch as it was handed on (write-ahead); per
// server, the index of the conversations it holds state for, which is how
// a start finds them (the storage API cannot list keys).
//
// Keys, under openhands/<host:port>/ (the server's identity in AEP sources):
//
//	conversations/<nn>          index bucket nn (00 to ff, by hash of the id):
//	                            {"v":1,"ids":[...],"ended":[...]}
//	conversation/<id>/state     durableState (encodeState), but its Control
//	conversation/<id>/control   its Control (encodeControl)
//	conversation/<id>/batch     the pending batch, OTLP protobuf
//
// The state and the batch are written together in one storage batch
// before the records leave, with the control state when it changed (it
// holds up to 64 recorded acks, and most batches change none) and the
// conversation's index bucket the first time. The next write-ahead replaces the batch; the last one is
// deleted when the conversation detaches or the receiver stops. After a
// crash, a batch still present may or may not have left, and is sent again
// byte for byte, a legal redelivery either way.
//
// A conversation that ended for good leaves in one storage batch (forget):
// its state, its batch and its index entry go, and its id joins its
// bucket's short list of recently ended ones, so a restart still knows not
// to start it again. Storage thus holds the conversations the server
// still has, and at most endedPerBucket ids per bucket besides.
//
// Releases before the buckets kept one index of every id under
// "conversations"; a start splits it into buckets (load).
type journal struct {
	client storage.Client
	prefix string

	mu      sync.Mutex
	buckets [indexBuckets]indexBucket
}

const (
	// indexBuckets is how many keys the index is split into: a new or
	// ended conversation rewrites one of them, 1/256 of the index.
	indexBuckets = 256
	// endedPerBucket bounds the recently ended ids a bucket remembers: a
	// restart meets again only the ones that just ended (a conversation
	// still listed while it is deleted, a lookup racing the listing).
	endedPerBucket = 8
	// loadChunk bounds the keys of one storage batch of a start's reads:
	// one transaction per chunk, not per key.
	loadChunk = 4096
)

// indexBucket is one key of the index.
type indexBucket struct {
	ids   map[string]struct{}
	ended []string // oldest first
}

func newJournal(client storage.Client, hostPort string) *journal {
	j := &journal{client: client, prefix: "openhands/" + hostPort + "/"}
	for i := range j.buckets {
		j.buckets[i].ids = make(map[string]struct{})
	}
	return j
}

// legacyIndexKey is the single index of releases before the buckets.
func (j *journal) legacyIndexKey() string      { return j.prefix + "conversations" }
func (j *journal) bucketKey(n int) string      { return fmt.Sprintf("%sconversations/%02x", j.prefix, n) }
func (j *journal) stateKey(id string) string   { return j.prefix + "conversation/" + id + "/state" }
func (j *journal) batchKey(id string) string   { return j.prefix + "conversation/" + id + "/batch" }
func (j *journal) controlKey(id string) string { return j.prefix + "conversation/" + id + "/control" }

// bucketOf is the index bucket of a conversation id: FNV-1a 32 of the id
// as the server spells it.
func bucketOf(id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % indexBuckets)
}

// encodeBatch is the write-ahead form of a batch: OTLP protobuf, which
// decodes to the very records that were handed on.
func encodeBatch(logs plog.Logs) ([]byte, error) {
	raw, err := (&plog.ProtoMarshaler{}).MarshalLogs(logs)
	if err != nil {
		return nil, fmt.Errorf("encode pending batch: %w", err)
	}
	return raw, nil
}

// journalIndex is the value of one index bucket, and of the legacy
// single index (which has no Ended).
type journalIndex struct {
	Version int      `json:"v"`
	IDs     []string `json:"ids"`
	Ended   []string `json:"ended,omitempty"`
}

// storedIndex is what a start finds in the index.
type storedIndex struct {
	live  []string // conversations with state in storage
	ended []string // recently ended ones, no longer stored
}

// stored is one conversation as a start finds it in storage.
type stored struct {
	id      string
	state   durableState
	pending *plog.Logs // the batch that may not have left, nil if none
	err     error      // the state or batch could not be read
}

// load reads the index buckets in one storage batch, and splits an index
// of an older release into them (in one more). An unreadable bucket is
// reported in err, joined, and its conversations start fresh; the others
// are returned.
func (j *journal) load(ctx context.Context) (storedIndex, error) {
	ops := make([]*storage.Operation, 0, indexBuckets+1)
	for n := range indexBuckets {
		ops = append(ops, storage.GetOperation(j.bucketKey(n)))
	}
	legacy := storage.GetOperation(j.legacyIndexKey())
	if err := j.client.Batch(ctx, append(ops, legacy)...); err != nil {
		return storedIndex{}, fmt.Errorf("read the conversation index: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	for n, op := range ops {
		if op.Value == nil {
			continue
		}
		index, err := decodeIndex(op.Key, op.Value)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range index.IDs {
			j.buckets[n].ids[id] = struct{}{}
		}
		j.buckets[n].ended = index.Ended
	}
	if legacy.Value != nil {
		errs = append(errs, j.upgradeLocked(ctx, legacy.Key, legacy.Value))
	}
	var out storedIndex
	for _, b := range j.buckets {
		out.live = append(out.live, slices.Collect(maps.Keys(b.ids))...)
		out.ended = append(out.ended, b.ended...)
	}
	slices.Sort(out.live)
	return out, errors.Join(errs...)
}

func decodeIndex(key string, raw []byte) (journalIndex, error) {
	var index journalIndex
	if err := json.Unmarshal(raw, &index); err != nil || index.Version != 1 {
		return journalIndex{}, fmt.Errorf("read %s: not a version 1 index (%v)", key, err)
	}
	return index, nil
}

// upgradeLocked moves the ids of an older release's single index into
// their buckets, and deletes it, in one storage batch. Should that write
// fail, the ids are still indexed in memory, each bucket is written with
// its next change, and the next start upgrades again.
func (j *journal) upgradeLocked(ctx context.Context, key string, raw []byte) error {
	index, err := decodeIndex(key, raw)
	if err != nil {
		return err
	}
	touched := make(map[int]bool)
	for _, id := range index.IDs {
		n := bucketOf(id)
		j.buckets[n].ids[id] = struct{}{}
		touched[n] = true
	}
	ops := []*storage.Operation{storage.DeleteOperation(key)}
	for n := range touched {
		op, err := j.bucketOpLocked(n)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	if err := j.client.Batch(ctx, ops...); err != nil {
		return fmt.Errorf("storage: split %s into buckets: %w", key, err)
	}
	return nil
}

// bucketOpLocked is the write of bucket n as it is in memory.
func (j *journal) bucketOpLocked(n int) (*storage.Operation, error) {
	b := &j.buckets[n]
	ids := slices.Sorted(maps.Keys(b.ids))
	raw, err := json.Marshal(journalIndex{Version: 1, IDs: ids, Ended: b.ended})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", j.bucketKey(n), err)
	}
	return storage.SetOperation(j.bucketKey(n), raw), nil
}

// pending returns those of ids that have a pending batch, reading the
// batch keys loadChunk at a time.
func (j *journal) pending(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	for chunk := range slices.Chunk(ids, loadChunk) {
		ops := make([]*storage.Operation, len(chunk))
		for i, id := range chunk {
			ops[i] = storage.GetOperation(j.batchKey(id))
		}
		if err := j.client.Batch(ctx, ops...); err != nil {
			return out, fmt.Errorf("read pending batches: %w", err)
		}
		for i, op := range ops {
			if op.Value != nil {
				out = append(out, chunk[i])
			}
		}
	}
	return out, nil
}

func (j *journal) loadConversation(ctx context.Context, id string) stored {
	s := stored{id: id}
	state, control, batch := storage.GetOperation(j.stateKey(id)), storage.GetOperation(j.controlKey(id)), storage.GetOperation(j.batchKey(id))
	if s.err = j.client.Batch(ctx, state, control, batch); s.err != nil {
		return s
	}
	if state.Value == nil {
		s.err = fmt.Errorf("indexed, but %s is missing", j.stateKey(id))
		return s
	}
	if s.state, s.err = decodeState(state.Value); s.err != nil {
		return s
	}
	if control.Value != nil {
		if s.state.Control, s.err = decodeControl(control.Value); s.err != nil {
			return s
		}
	}
	if batch.Value != nil {
		logs, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(batch.Value)
		if err != nil {
			s.err = fmt.Errorf("decode pending batch: %w", err)
			return s
		}
		s.pending = &logs
	}
	return s
}

// writeAhead persists a conversation's state, its control state when it
// changed (control, nil when not), and the batch about to leave with
// them, and indexes the conversation the first time. It returns the bytes
// written, keys included.
func (j *journal) writeAhead(ctx context.Context, id string, state durableState, control, pending []byte) (int, error) {
	ops, err := j.stateOps(id, state, control)
	if err != nil {
		return 0, err
	}
	ops = append(ops, storage.SetOperation(j.batchKey(id), pending))
	n := bucketOf(id)
	// Under the lock, so two new conversations of a bucket cannot drop
	// each other from it.
	j.mu.Lock()
	defer j.mu.Unlock()
	b := &j.buckets[n]
	if _, ok := b.ids[id]; ok {
		return written(ops), j.batch(ctx, ops)
	}
	b.ids[id] = struct{}{}
	op, err := j.bucketOpLocked(n)
	if err == nil {
		ops = append(ops, op)
		err = j.batch(ctx, ops)
	}
	if err != nil {
		delete(b.ids, id)
		return 0, err
	}
	return written(ops), nil
}

// saveState persists a conversation's state, and its control state when
// it changed (control, nil when not), between batches, and returns the
// bytes written, keys included.
func (j *journal) saveState(ctx context.Context, id string, state durableState, control []byte) (int, error) {
	ops, err := j.stateOps(id, state, control)
	if err != nil {
		return 0, err
	}
	if err := j.client.Batch(ctx, ops...); err != nil {
		return 0, fmt.Errorf("storage: write %s: %w", j.stateKey(id), err)
	}
	return written(ops), nil
}

// stateOps are the writes of a conversation's state, without its control
// state, and of that when it changed.
func (j *journal) stateOps(id string, state durableState, control []byte) ([]*storage.Operation, error) {
	state.Control = openhandscontrol.State{}
	raw, err := encodeState(state)
	if err != nil {
		return nil, err
	}
	ops := []*storage.Operation{storage.SetOperation(j.stateKey(id), raw)}
	if control != nil {
		ops = append(ops, storage.SetOperation(j.controlKey(id), control))
	}
	return ops, nil
}

// forget removes a conversation that ended for good: its state, its
// batch and its index entry, in one storage batch, which also adds it to
// its bucket's recently ended ids. Its session.ended must have been handed
// on: until this write, a restart sends it again.
func (j *journal) forget(ctx context.Context, id string) error {
	n := bucketOf(id)
	j.mu.Lock()
	defer j.mu.Unlock()
	b := &j.buckets[n]
	_, indexed := b.ids[id]
	ended := b.ended // appending leaves its elements as they are
	delete(b.ids, id)
	if !slices.Contains(b.ended, id) {
		b.ended = append(b.ended, id)
		b.ended = b.ended[max(0, len(b.ended)-endedPerBucket):]
	}
	op, err := j.bucketOpLocked(n)
	if err == nil {
		err = j.client.Batch(ctx, storage.DeleteOperation(j.stateKey(id)), storage.DeleteOperation(j.controlKey(id)),
			storage.DeleteOperation(j.batchKey(id)), op)
	}
	if err != nil {
		if indexed {
			b.ids[id] = struct{}{}
		}
		b.ended = ended
		return fmt.Errorf("storage: remove ended conversation %s: %w", id, err)
	}
	return nil
}

func written(ops []*storage.Operation) int {
	n := 0
	for _, op := range ops {
		n += len(op.Key) + len(op.Value)
	}
	return n
}

// done deletes a conversation's pending batch, which the pipeline took.
func (j *journal) done(ctx context.Context, id string) error {
	if err := j.client.Delete(ctx, j.batchKey(id)); err != nil {
		return fmt.Errorf("storage: delete %s: %w", j.batchKey(id), err)
	}
	return nil
}

func (j *journal) batch(ctx context.Context, ops []*storage.Operation) error {
	if err := j.client.Batch(ctx, ops...); err != nil {
		return fmt.Errorf("storage: write-ahead %d keys: %w", len(ops), err)
	}
	return nil
}
