package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

// recentIDs remembers the last capacity vendor event ids of one
// conversation. Overlap only ever spans the resume margin of a reconnect or
// the frames buffered while history was paged, so a bounded window is
// enough and a long-lived conversation does not grow the receiver's memory.
// The window grows with use rather than being allocated up front: sized
// for a full window, an idle conversation would hold over half a megabyte.
type recentIDs struct {
	set      map[string]struct{}
	ring     []string // oldest at next once full
	next     int
	capacity int
}

const dedupeWindow = 8192

func newRecentIDs(capacity int) *recentIDs {
	return &recentIDs{set: make(map[string]struct{}), capacity: capacity}
}

// add records id and reports whether it was new.
func (r *recentIDs) add(id string) bool {
	if _, ok := r.set[id]; ok {
		return false
	}
	if len(r.ring) < r.capacity {
		r.ring = append(r.ring, id)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % r.capacity
	}
	r.set[id] = struct{}{}
	return true
}

// has reports whether id is in the window.
func (r *recentIDs) has(id string) bool {
	_, ok := r.set[id]
	return ok
}
