package aepinboundprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"

import (
	"container/list"

	"github.com/otelcol-openhands/otelcol-openhands/internal/epoch"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor/internal/vendormap"
)

type sessionKey struct {
	vendor  vendormap.Vendor
	session string
}

// sessionState is one AEP session's position: it owns the session's
// (epoch, seq), as the openhands receiver owns its conversations'.
type sessionState struct {
	key     sessionKey
	source  string
	epoch   int64
	seq     int64
	started bool // session.started emitted in this epoch
	elem    *list.Element
}

// sessionTable keeps at most limit sessions, least recently seen evicted
// first. A session seen again after its eviction restarts seq at 0, which
// AEP allows only in a later epoch (AEP-0001 §7): evicting a session of
// the current epoch moves new sessions to a fresh one, so a returning
// session always lands past the epoch it left.
type sessionTable struct {
	limit   int
	byKey   map[sessionKey]*sessionState
	recent  *list.List // front: most recently seen
	epochs  *epoch.Clock
	current int64 // the epoch new sessions start in
}

func newSessionTable(limit int, epochs *epoch.Clock) *sessionTable {
	return &sessionTable{
		limit:   limit,
		byKey:   make(map[sessionKey]*sessionState),
		recent:  list.New(),
		epochs:  epochs,
		current: epochs.Next(),
	}
}

func (t *sessionTable) lookup(key sessionKey) (*sessionState, bool) {
	st, ok := t.byKey[key]
	if ok {
		t.recent.MoveToFront(st.elem)
	}
	return st, ok
}

// add creates key's state with source, at restored when the session has
// a stored position, else at seq 0 of the current epoch; evicted reports
// whether another session was forgotten to make room.
func (t *sessionTable) add(key sessionKey, source string, restored *storedPosition) (st *sessionState, evicted bool) {
	if len(t.byKey) >= t.limit {
		oldest := t.recent.Remove(t.recent.Back()).(*sessionState)
		delete(t.byKey, oldest.key)
		if oldest.epoch == t.current {
			t.current = t.epochs.Next()
		}
		evicted = true
	}
	st = &sessionState{key: key, source: source, epoch: t.current}
	if restored != nil {
		st.epoch, st.seq, st.started = restored.Epoch, restored.Seq, restored.Started
	}
	st.elem = t.recent.PushFront(st)
	t.byKey[key] = st
	return st, evicted
}
