package aeppolicyprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/otelcol-openhands/otelcol-openhands/internal/storageclient"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor/internal/policy"
)

// stateStore keeps the engine's state in a storage extension: one value
// per session (session/<agent>/<session>) and per agent (agent/<agent>),
// each a versioned policy state, and an index listing them, so that a
// restarted collector judges every session it knew, quiet ones included.
//
// State is written ahead: before a batch and its breaches leave, what they
// changed is stored. A crash after the write and before the hand-off
// loses nothing the sender does not send again: its retry is recognised
// as seen, and a breach it fired is not fired twice.
type stateStore struct {
	client storage.Client
}

const indexKey = "index"

type storedIndex struct {
	Version  int                 `json:"v"`
	Sessions []policy.SessionKey `json:"sessions"`
	Agents   []string            `json:"agents"`
}

func sessionKey(k policy.SessionKey) string {
	return "session/" + url.PathEscape(k.Agent) + "/" + url.PathEscape(k.Session)
}

func agentKey(agent string) string { return "agent/" + url.PathEscape(agent) }

func openStateStore(ctx context.Context, host component.Host, id, self component.ID) (*stateStore, error) {
	client, err := storageclient.Get(ctx, host, id, component.KindProcessor, self)
	if err != nil {
		return nil, err
	}
	return &stateStore{client: client}, nil
}

// load reads every stored state the index lists. A value that cannot be
// read is reported in skipped and left out: its session starts afresh in
// a new epoch.
func (s *stateStore) load(ctx context.Context) (sessions []*policy.SessionState, agents []*policy.AgentState, skipped []error, err error) {
	raw, err := s.client.Get(ctx, indexKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("storage: read %s: %w", indexKey, err)
	}
	if raw == nil {
		return nil, nil, nil, nil
	}
	var index storedIndex
	if err := json.Unmarshal(raw, &index); err != nil || index.Version != policy.StateVersion {
		return nil, nil, []error{fmt.Errorf("storage: %s is not a version %d index", indexKey, policy.StateVersion)}, nil
	}
	sessions, skippedSessions, err := loadEach(ctx, s, index.Sessions, sessionKey, policy.DecodeSession,
		func(k policy.SessionKey, st *policy.SessionState) bool {
			return st.Agent == k.Agent && st.Session == k.Session
		})
	if err != nil {
		return nil, nil, nil, err
	}
	agents, skippedAgents, err := loadEach(ctx, s, index.Agents, agentKey, policy.DecodeAgent,
		func(agent string, a *policy.AgentState) bool { return a.Agent == agent })
	if err != nil {
		return nil, nil, nil, err
	}
	return sessions, agents, append(skippedSessions, skippedAgents...), nil
}

// loadEach reads the value of each key: decoded, and naming the key it is
// stored under (belongs), or reported in skipped.
func loadEach[K any, V any](ctx context.Context, s *stateStore, keys []K, storageKey func(K) string,
	decode func([]byte) (*V, error), belongs func(K, *V) bool,
) (values []*V, skipped []error, err error) {
	for _, k := range keys {
		raw, err := s.client.Get(ctx, storageKey(k))
		if err != nil {
			return nil, nil, fmt.Errorf("storage: read %s: %w", storageKey(k), err)
		}
		if raw == nil {
			continue
		}
		v, err := decode(raw)
		if err != nil || !belongs(k, v) {
			skipped = append(skipped, fmt.Errorf("storage: %s is unreadable", storageKey(k)))
			continue
		}
		values = append(values, v)
	}
	return values, skipped, nil
}

// save writes what changed in one storage batch, and the index when the
// set of sessions or agents changed.
func (s *stateStore) save(ctx context.Context, c policy.Changes, engine *policy.Engine) error {
	ops := make([]*storage.Operation, 0, len(c.Sessions)+len(c.Removed)+len(c.Agents)+1)
	for _, st := range c.Sessions {
		raw, err := policy.Encode(st)
		if err != nil {
			return err
		}
		ops = append(ops, storage.SetOperation(sessionKey(policy.SessionKey{Agent: st.Agent, Session: st.Session}), raw))
	}
	for _, k := range c.Removed {
		ops = append(ops, storage.DeleteOperation(sessionKey(k)))
	}
	for _, a := range c.Agents {
		raw, err := policy.Encode(a)
		if err != nil {
			return err
		}
		ops = append(ops, storage.SetOperation(agentKey(a.Agent), raw))
	}
	if c.KeysChanged {
		sessions, agents := engine.Keys()
		raw, err := json.Marshal(storedIndex{Version: policy.StateVersion, Sessions: sessions, Agents: agents})
		if err != nil {
			return err
		}
		ops = append(ops, storage.SetOperation(indexKey, raw))
	}
	if len(ops) == 0 {
		return nil
	}
	if err := s.client.Batch(ctx, ops...); err != nil {
		return fmt.Errorf("storage: write %d policy states: %w", len(ops), err)
	}
	return nil
}

func (s *stateStore) close(ctx context.Context) error { return s.client.Close(ctx) }
