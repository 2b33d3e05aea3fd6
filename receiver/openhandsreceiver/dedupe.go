package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"math"

	"github.com/otelcol-openhands/otelcol-openhands/internal/recent"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// overlapIDs is one conversation's vendor-id dedupe, bounded by what can
// overlap rather than by how long the conversation has run.
//
// Only the legacy socket needs it for stored events: a reconnect pages the
// history from resumeMargin before the newest vendor timestamp seen, and
// the live frames buffered while an attach pages the history repeat the
// history's newest events. So it keeps the ids whose vendor time lies
// within resumeMargin of the newest, and, while an attach pages the history
// and drains its buffer (hold), every id from resumeMargin before the
// connection's subscribe time on. On /sockets/session the seq cursor orders
// and dedupes stored events by itself; only a stored event the server sent
// as transient (published before it was persisted) is remembered, until
// its durable frame retires it.
//
// entries, in insertion order, is the whole state (what a durable store
// would keep); index is rebuilt from it. Never more than maxOverlapIDs are
// kept: past that the oldest go first (a duplicate becomes possible, never
// a loss).
type overlapIDs struct {
	entries []overlapEntry // insertion order; pruned from the front
	index   map[string]int64
	peak    int   // index size since it was last rebuilt
	newest  int64 // newest vendor time added, unix ns

	// While holding, ids at or after holdFloor stay; the hold ends once
	// newest passes holdUntil.
	holding              bool
	holdFloor, holdUntil int64
}

type overlapEntry struct {
	id string
	at int64 // vendor time, unix ns
}

// maxOverlapIDs caps the window whatever the event rate: 8,192 ids, about
// 1 MiB, for a conversation emitting over 1,600 events/s.
const maxOverlapIDs = 8192

func newOverlapIDs() *overlapIDs {
	return &overlapIDs{index: make(map[string]int64)}
}

// add records id, stamped ts (the vendor timestamp, verbatim), and reports
// whether it was new. An unreadable ts counts as the newest time seen.
func (o *overlapIDs) add(id, ts string) bool {
	if _, ok := o.index[id]; ok {
		return false
	}
	at := o.newest
	if t, ok := mapping.ParseVendorTime(ts); ok {
		at = t.UnixNano()
	}
	o.newest = max(o.newest, at)
	o.endHold()
	if at < o.cutoff() {
		return true // nothing can repeat it
	}
	o.entries = append(o.entries, overlapEntry{id: id, at: at})
	o.index[id] = at
	o.peak = max(o.peak, len(o.index))
	o.prune()
	return true
}

// cutoff is the vendor time before which no id can repeat.
func (o *overlapIDs) cutoff() int64 {
	c := o.newest - int64(resumeMargin)
	if o.holding {
		c = min(c, o.holdFloor)
	}
	return c
}

func (o *overlapIDs) endHold() {
	if o.holding && o.newest > o.holdUntil {
		o.holding = false
	}
}

// retire drops id and reports whether it was there.
func (o *overlapIDs) retire(id string) bool {
	if _, ok := o.index[id]; !ok {
		return false
	}
	delete(o.index, id)
	return true
}

// hold keeps every id stamped at or after resumeMargin before subscribedTS
// (the connection's first frame; "" keeps every id) until historyDone.
func (o *overlapIDs) hold(subscribedTS string) {
	o.holding, o.holdFloor, o.holdUntil = true, math.MinInt64, math.MaxInt64
	if t, ok := mapping.ParseVendorTime(subscribedTS); ok {
		o.holdFloor = t.Add(-resumeMargin).UnixNano()
	}
}

// historyDone ends the hold once an event stamped more than resumeMargin
// after the history's newest arrives: every live frame repeating the
// history was published before it.
func (o *overlapIDs) historyDone() {
	if o.holding {
		o.holdUntil = o.newest + int64(resumeMargin)
	}
}

func (o *overlapIDs) len() int { return len(o.index) }

// ids lists the window's ids, oldest first: what a stored cursor keeps.
func (o *overlapIDs) ids() []string {
	out := make([]string, 0, len(o.index))
	for _, e := range o.entries {
		if at, ok := o.index[e.id]; ok && at == e.at {
			out = append(out, e.id)
		}
	}
	return out
}

func (o *overlapIDs) prune() {
	cutoff := o.cutoff()
	drop := 0
	for drop < len(o.entries) && (o.entries[drop].at < cutoff || len(o.entries)-drop > maxOverlapIDs) {
		e := o.entries[drop]
		if at, ok := o.index[e.id]; ok && at == e.at {
			delete(o.index, e.id)
		}
		drop++
	}
	if drop == 0 {
		return
	}
	// Compact so the backing array does not grow with the history.
	n := copy(o.entries, o.entries[drop:])
	clear(o.entries[n:])
	o.entries = o.entries[:n]
	if cap(o.entries) > 64 && n < cap(o.entries)/4 {
		o.entries = append([]overlapEntry(nil), o.entries...)
	}
	// A Go map keeps its peak size; rebuild it once mostly empty.
	if o.peak > 64 && len(o.index) < o.peak/4 {
		index := make(map[string]int64, len(o.index))
		for id, at := range o.index {
			index[id] = at
		}
		o.index, o.peak = index, len(index)
	}
}

// recentIDs remembers the last capacity ids: the conversations a server
// watch has ended, so that one seen again is not given a second session.
type recentIDs struct {
	recent.Window[struct{}]
}

// endedWindow bounds the ended conversations remembered per server.
const endedWindow = 8192

func newRecentIDs(capacity int) *recentIDs {
	return &recentIDs{recent.New[struct{}](capacity)}
}

// add records id and reports whether it was new.
func (r *recentIDs) add(id string) bool { return r.Put(id, struct{}{}) }
