package aeprelaytest

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// position is an Event's place in its session (AEP-0001 §7).
type position struct{ epoch, seq int64 }

func (p position) compare(q position) int {
	return cmp.Or(cmp.Compare(p.epoch, q.epoch), cmp.Compare(p.seq, q.seq))
}

// token is the SSE id of a position: {session}:{epoch}:{seq} (AEP-0003
// §3.3).
func token(session string, p position) string {
	return session + ":" + strconv.FormatInt(p.epoch, 10) + ":" + strconv.FormatInt(p.seq, 10)
}

// parseToken reads a token from the right, so that a session may itself
// contain colons.
func parseToken(s string) (string, position, error) {
	rest, seqText, ok1 := cutLast(s, ":")
	session, epochText, ok2 := cutLast(rest, ":")
	if !ok1 || !ok2 || session == "" {
		return "", position{}, fmt.Errorf("resume token %q is not {session}:{epoch}:{seq}", s)
	}
	epoch, err1 := strconv.ParseInt(epochText, 10, 64)
	seq, err2 := strconv.ParseInt(seqText, 10, 64)
	if err1 != nil || err2 != nil || epoch < 0 || seq < 0 {
		return "", position{}, fmt.Errorf("resume token %q: epoch and seq must be integers ≥ 0", s)
	}
	return session, position{epoch, seq}, nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// ingested is one valid Event on its way through the relay.
type ingested struct {
	raw        []byte
	ev         *aep.Event
	pos        position
	positioned bool // carries session and seq
	binding    Binding
	conn       int
	at         time.Time // when the relay ingested it
}

func newIngested(raw []byte, ev *aep.Event, b Binding, conn int) *ingested {
	in := &ingested{raw: raw, ev: ev, binding: b, conn: conn, at: time.Now()}
	if ev.Session != "" && ev.Seq != nil {
		in.pos, in.positioned = position{ev.EffectiveEpoch(), *ev.Seq}, true
	}
	return in
}

func (in *ingested) record() Record {
	return Record{Raw: in.raw, Event: in.ev, Binding: in.binding, Conn: in.conn, ReceivedAt: in.at}
}

type sessionKey struct{ source, session string }

// sessionBuffer is one session's bounded replay buffer. Entries are in
// (epoch, seq) order; an Event without seq (attention.routed) is appended
// where it arrives and orders nothing before it.
type sessionBuffer struct {
	key     sessionKey
	entries []*ingested
	ids     map[string]struct{} // ids of the held entries
	// dropped is the highest position trimmed away: a resume below it has
	// lost Events.
	dropped    position
	hasDropped bool
	lastWrite  uint64
}

// store holds the replay buffers (AEP-0003 §5; reference bufferEvent).
// It is not safe for concurrent use.
type store struct {
	perSession  int
	maxSessions int
	buffers     map[sessionKey]*sessionBuffer
	// tombstones remember the highest position of evicted sessions, so
	// that a resume into one is told replay-exhausted.
	tombstones map[sessionKey]position
	clock      uint64
}

func newStore(perSession, maxSessions int) *store {
	return &store{
		perSession:  perSession,
		maxSessions: maxSessions,
		buffers:     make(map[sessionKey]*sessionBuffer),
		tombstones:  make(map[sessionKey]position),
	}
}

// admit buffers an Event: admission dedupes on (source, id), inserts by
// (epoch, seq), trims the session oldest-first and evicts the least
// recently written session past the cap. It reports whether the Event was
// admitted (false for a redelivery or a colliding id).
func (s *store) admit(in *ingested) bool {
	key := sessionKey{in.ev.Source, in.ev.Session}
	b := s.buffers[key]
	if b == nil {
		b = s.create(key)
	}
	if _, dup := b.ids[in.ev.ID]; dup {
		return false
	}
	s.clock++
	b.lastWrite = s.clock
	b.ids[in.ev.ID] = struct{}{}
	b.insert(in)
	for len(b.entries) > s.perSession {
		b.trimOldest()
	}
	return true
}

func (s *store) create(key sessionKey) *sessionBuffer {
	if len(s.buffers) >= s.maxSessions {
		s.evictLeastRecentlyWritten()
	}
	b := &sessionBuffer{key: key, ids: make(map[string]struct{})}
	if p, ok := s.tombstones[key]; ok {
		b.dropped, b.hasDropped = p, true
		delete(s.tombstones, key)
	}
	s.buffers[key] = b
	return b
}

func (s *store) evictLeastRecentlyWritten() {
	var victim *sessionBuffer
	for _, b := range s.buffers {
		if victim == nil || b.lastWrite < victim.lastWrite {
			victim = b
		}
	}
	if victim == nil {
		return
	}
	delete(s.buffers, victim.key)
	high, ok := victim.highest()
	if !ok {
		return
	}
	if len(s.tombstones) >= 4*s.maxSessions {
		for k := range s.tombstones { // bound the memory of evictions
			delete(s.tombstones, k)
			break
		}
	}
	s.tombstones[victim.key] = high
}

func (b *sessionBuffer) insert(in *ingested) {
	i := len(b.entries)
	if in.positioned {
		for i > 0 {
			prev := b.entries[i-1]
			if !prev.positioned || prev.pos.compare(in.pos) <= 0 {
				break
			}
			i--
		}
	}
	b.entries = slices.Insert(b.entries, i, in)
}

func (b *sessionBuffer) trimOldest() {
	old := b.entries[0]
	if old.positioned && (!b.hasDropped || old.pos.compare(b.dropped) > 0) {
		b.dropped, b.hasDropped = old.pos, true
	}
	delete(b.ids, old.ev.ID)
	b.entries[0] = nil
	b.entries = b.entries[1:]
}

// highest is the highest position the session ever held.
func (b *sessionBuffer) highest() (position, bool) {
	high, ok := b.dropped, b.hasDropped
	for _, e := range b.entries {
		if e.positioned && (!ok || e.pos.compare(high) > 0) {
			high, ok = e.pos, true
		}
	}
	return high, ok
}

// earliest is the first position held.
func (b *sessionBuffer) earliest() (position, bool) {
	for _, e := range b.entries {
		if e.positioned {
			return e.pos, true
		}
	}
	return position{}, false
}

// replayPart is what one (source, session) replays for a resume request.
type replayPart struct {
	key sessionKey
	// exhausted: Events after the resume point were trimmed or evicted.
	exhausted   bool
	earliest    position
	hasEarliest bool
	entries     []*ingested
}

// replayAfter answers a resume point: for every source holding the
// session, the Events strictly after p (AEP-0003 §7), and whether some
// were lost. An Event without seq replays only when it follows a replayed
// positioned one.
func (s *store) replayAfter(session string, p position) []replayPart {
	var parts []replayPart
	for _, b := range s.buffers {
		if b.key.session != session {
			continue
		}
		part := replayPart{key: b.key, exhausted: b.hasDropped && b.dropped.compare(p) > 0}
		part.earliest, part.hasEarliest = b.earliest()
		start := slices.IndexFunc(b.entries, func(e *ingested) bool { return e.positioned && e.pos.compare(p) > 0 })
		if start >= 0 {
			part.entries = slices.Clone(b.entries[start:])
		}
		parts = append(parts, part)
	}
	for key, high := range s.tombstones {
		if key.session == session && high.compare(p) > 0 {
			parts = append(parts, replayPart{key: key, exhausted: true})
		}
	}
	sortParts(parts)
	return parts
}

// replayAll is replay-all (AEP-0003 §5): every held session from its
// earliest Event, never exhausted.
func (s *store) replayAll() []replayPart {
	parts := make([]replayPart, 0, len(s.buffers))
	for _, b := range s.buffers {
		parts = append(parts, replayPart{key: b.key, entries: slices.Clone(b.entries)})
	}
	sortParts(parts)
	return parts
}

func sortParts(parts []replayPart) {
	slices.SortFunc(parts, func(a, b replayPart) int {
		return cmp.Or(strings.Compare(a.key.session, b.key.session), strings.Compare(a.key.source, b.key.source))
	})
}

// session returns one session's buffer in order.
func (s *store) session(key sessionKey) []*ingested {
	if b := s.buffers[key]; b != nil {
		return slices.Clone(b.entries)
	}
	return nil
}

// sessions lists the buffered sessions, sorted.
func (s *store) sessions() []SessionRef {
	refs := make([]SessionRef, 0, len(s.buffers))
	for k := range s.buffers {
		refs = append(refs, SessionRef{Source: k.source, Session: k.session})
	}
	slices.SortFunc(refs, func(a, b SessionRef) int {
		return cmp.Or(strings.Compare(a.Session, b.Session), strings.Compare(a.Source, b.Source))
	})
	return refs
}
