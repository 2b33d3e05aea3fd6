package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

// recentIDs remembers the last capacity vendor event ids of one
// conversation. Overlap only ever spans the resume margin of a reconnect or
// the frames buffered while history was paged, so a bounded window is
// enough and a long-lived conversation does not grow the receiver's memory.
type recentIDs struct {
	set  map[string]struct{}
	ring []string
	next int
}

const dedupeWindow = 8192

func newRecentIDs(capacity int) *recentIDs {
	return &recentIDs{set: make(map[string]struct{}, capacity), ring: make([]string, capacity)}
}

// add records id and reports whether it was new.
func (r *recentIDs) add(id string) bool {
	if _, ok := r.set[id]; ok {
		return false
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
	return true
}

// has reports whether id is in the window.
func (r *recentIDs) has(id string) bool {
	_, ok := r.set[id]
	return ok
}
