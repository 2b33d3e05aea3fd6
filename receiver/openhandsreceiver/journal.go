package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"
)

// journal is one agent server's part of the receiver's storage. Per
// conversation it holds the durable state and, while a batch is on its way
// to the pipeline, that batch as it was handed on (write-ahead); per
// server, the index of the conversations it holds state for, which is how
// a start finds them (the storage API cannot list keys).
//
// Keys, under openhands/<host:port>/ (the server's identity in AEP sources):
//
//	conversations               index: {"v":1,"ids":[...]}
//	conversation/<id>/state     durableState (encodeState)
//	conversation/<id>/batch     the pending batch, OTLP protobuf
//
// The state and the batch are written together in one storage batch
// before the records leave. The next write-ahead replaces the batch; the
// last one is deleted when the conversation detaches or the receiver stops.
// After a crash, a batch still present may or may not have left, and is
// sent again byte for byte, a legal redelivery either way.
type journal struct {
	client storage.Client
	prefix string

	mu      sync.Mutex
	indexed map[string]struct{}
}

func newJournal(client storage.Client, hostPort string) *journal {
	return &journal{client: client, prefix: "openhands/" + hostPort + "/", indexed: make(map[string]struct{})}
}

func (j *journal) indexKey() string          { return j.prefix + "conversations" }
func (j *journal) stateKey(id string) string { return j.prefix + "conversation/" + id + "/state" }
func (j *journal) batchKey(id string) string { return j.prefix + "conversation/" + id + "/batch" }

// encodeBatch is the write-ahead form of a batch: OTLP protobuf, which
// decodes to the very records that were handed on.
func encodeBatch(logs plog.Logs) ([]byte, error) {
	raw, err := (&plog.ProtoMarshaler{}).MarshalLogs(logs)
	if err != nil {
		return nil, fmt.Errorf("encode pending batch: %w", err)
	}
	return raw, nil
}

type journalIndex struct {
	Version int      `json:"v"`
	IDs     []string `json:"ids"`
}

// stored is one conversation as a start finds it in storage.
type stored struct {
	id      string
	state   durableState
	pending *plog.Logs // the batch that may not have left, nil if none
	err     error      // the state or batch could not be read
}

// load reads the index, then each indexed conversation's state and
// pending batch. An unreadable index is an error; an unreadable
// conversation is returned with err set, for the caller to start fresh.
func (j *journal) load(ctx context.Context) ([]stored, error) {
	raw, err := j.client.Get(ctx, j.indexKey())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", j.indexKey(), err)
	}
	if raw == nil {
		return nil, nil
	}
	var index journalIndex
	if err := json.Unmarshal(raw, &index); err != nil || index.Version != 1 {
		return nil, fmt.Errorf("read %s: not a version 1 index (%v)", j.indexKey(), err)
	}
	j.mu.Lock()
	for _, id := range index.IDs {
		j.indexed[id] = struct{}{}
	}
	j.mu.Unlock()
	out := make([]stored, 0, len(index.IDs))
	for _, id := range index.IDs {
		out = append(out, j.loadConversation(ctx, id))
	}
	return out, nil
}

func (j *journal) loadConversation(ctx context.Context, id string) stored {
	s := stored{id: id}
	state, batch := storage.GetOperation(j.stateKey(id)), storage.GetOperation(j.batchKey(id))
	if s.err = j.client.Batch(ctx, state, batch); s.err != nil {
		return s
	}
	if state.Value == nil {
		s.err = fmt.Errorf("indexed, but %s is missing", j.stateKey(id))
		return s
	}
	if s.state, s.err = decodeState(state.Value); s.err != nil {
		return s
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

// writeAhead persists a conversation's state and the batch about to leave
// with it, and indexes the conversation the first time. It returns the
// bytes written, keys included.
func (j *journal) writeAhead(ctx context.Context, id string, state durableState, pending []byte) (int, error) {
	raw, err := encodeState(state)
	if err != nil {
		return 0, err
	}
	ops := []*storage.Operation{storage.SetOperation(j.stateKey(id), raw), storage.SetOperation(j.batchKey(id), pending)}
	j.mu.Lock()
	if _, ok := j.indexed[id]; ok {
		j.mu.Unlock()
		return written(ops), j.batch(ctx, ops)
	}
	// First write for this conversation: the index grows in the same
	// storage batch, under the lock so two new conversations cannot drop
	// each other from it.
	defer j.mu.Unlock()
	ids := append(slices.Collect(maps.Keys(j.indexed)), id)
	slices.Sort(ids)
	index, err := json.Marshal(journalIndex{Version: 1, IDs: ids})
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", j.indexKey(), err)
	}
	ops = append(ops, storage.SetOperation(j.indexKey(), index))
	if err := j.batch(ctx, ops); err != nil {
		return 0, err
	}
	j.indexed[id] = struct{}{}
	return written(ops), nil
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
