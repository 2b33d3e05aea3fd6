package aepinboundprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/otelcol-openhands/otelcol-openhands/internal/storageclient"
)

// positionStore keeps each session's position in a storage extension, so
// a restarted collector continues a session where it stopped, in the same
// epoch. Key aepinbound/<agent>/<session, path-escaped>, value
// {"v":1,"epoch":…,"seq":…,"started":…}: the next seq to assign.
//
// Positions are written ahead: before a batch leaves, its sessions' next
// positions are stored. A crash between the write and the hand-off costs a
// gap (legal), never a position reused by another event.
type positionStore struct {
	client storage.Client
}

type storedPosition struct {
	Version int   `json:"v"`
	Epoch   int64 `json:"epoch"`
	Seq     int64 `json:"seq"`
	Started bool  `json:"started,omitempty"`
}

// openPositionStore gets this processor's client of the storage
// extension id.
func openPositionStore(ctx context.Context, host component.Host, id, self component.ID) (*positionStore, error) {
	client, err := storageclient.Get(ctx, host, id, component.KindProcessor, self)
	if err != nil {
		return nil, err
	}
	return &positionStore{client: client}, nil
}

func positionKey(k sessionKey) string {
	return "aepinbound/" + string(k.vendor) + "/" + url.PathEscape(k.session)
}

// errUnreadablePosition: what is stored is not a version 1 position. The
// session then starts afresh in the current epoch, which is later than
// any epoch an earlier process stored.
var errUnreadablePosition = errors.New("not a version 1 position")

// load reads k's stored position; nil when there is none.
func (s *positionStore) load(ctx context.Context, k sessionKey) (*storedPosition, error) {
	raw, err := s.client.Get(ctx, positionKey(k))
	if err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", positionKey(k), err)
	}
	if raw == nil {
		return nil, nil
	}
	var pos storedPosition
	if err := json.Unmarshal(raw, &pos); err != nil || pos.Version != 1 || pos.Seq < 0 {
		return nil, fmt.Errorf("storage: %s: %w", positionKey(k), errUnreadablePosition)
	}
	return &pos, nil
}

// save writes the sessions' next positions in one storage batch.
func (s *positionStore) save(ctx context.Context, sessions []*sessionState) error {
	ops := make([]*storage.Operation, 0, len(sessions))
	for _, st := range sessions {
		raw, err := json.Marshal(storedPosition{Version: 1, Epoch: st.epoch, Seq: st.seq, Started: st.started})
		if err != nil {
			return err
		}
		ops = append(ops, storage.SetOperation(positionKey(st.key), raw))
	}
	if err := s.client.Batch(ctx, ops...); err != nil {
		return fmt.Errorf("storage: write %d session positions: %w", len(ops), err)
	}
	return nil
}

func (s *positionStore) close(ctx context.Context) error { return s.client.Close(ctx) }
