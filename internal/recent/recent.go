// Package recent is a bounded window of the keys seen last: past its
// capacity the oldest key goes. The receiver remembers ended conversations
// and the vendor events it mapped with one, the aepfile exporter the
// events each session log holds.
package recent // import "github.com/otelcol-openhands/otelcol-openhands/internal/recent"

// Window remembers the last capacity keys, each with a value. A capacity
// of 0 or less remembers nothing.
type Window[V any] struct {
	values   map[string]V
	ring     []string // oldest at next once full
	next     int
	capacity int
}

// New returns an empty window of capacity keys.
func New[V any](capacity int) Window[V] {
	return Window[V]{values: make(map[string]V), capacity: capacity}
}

// Put records key with v and reports whether key was new; a known key
// keeps its value.
func (w *Window[V]) Put(key string, v V) bool {
	if _, ok := w.values[key]; ok {
		return false
	}
	switch {
	case w.capacity <= 0:
		return true
	case len(w.ring) < w.capacity:
		w.ring = append(w.ring, key)
	default:
		delete(w.values, w.ring[w.next])
		w.ring[w.next] = key
		w.next = (w.next + 1) % w.capacity
	}
	w.values[key] = v
	return true
}

// Has reports whether key is in the window.
func (w *Window[V]) Has(key string) bool {
	_, ok := w.values[key]
	return ok
}

// Get returns key's value, the zero value when key is not in the window.
func (w *Window[V]) Get(key string) V { return w.values[key] }

// Len is how many keys the window holds.
func (w *Window[V]) Len() int { return len(w.values) }
