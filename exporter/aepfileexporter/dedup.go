package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
)

// dedup remembers the last limit (source, id) pairs written to one file:
// an at-least-once upstream redelivers, and a redelivered event is not
// written twice.
type dedup struct {
	limit int
	keys  map[string]struct{}
	// ring holds the keys in the order they were added; next is the slot
	// the next key takes, evicting the oldest once the ring is full.
	ring []string
	next int
}

func newDedup(limit int) *dedup {
	return &dedup{limit: limit, keys: make(map[string]struct{}, limit)}
}

func dedupKey(source, id string) string { return source + "\x00" + id }

func (d *dedup) has(key string) bool {
	_, ok := d.keys[key]
	return ok
}

func (d *dedup) add(key string) {
	if d.limit == 0 || d.has(key) {
		return
	}
	if len(d.ring) < d.limit {
		d.ring = append(d.ring, key)
	} else {
		delete(d.keys, d.ring[d.next])
		d.ring[d.next] = key
	}
	d.next = (d.next + 1) % d.limit
	d.keys[key] = struct{}{}
}

// tailChunk is how much of a file is read at a time, from its end, to
// recover the keys of its last lines.
const tailChunk = 64 << 10

// recoverTail adds to d the keys of f's last d.limit lines, oldest first,
// and reports whether one of them is a session.ended; size is f's length,
// which ends with a complete line. A line that is not an event (a file
// someone else wrote to) is passed over.
func (d *dedup) recoverTail(f *os.File, size int64) (ended bool, err error) {
	if d.limit == 0 || size == 0 {
		return false, nil
	}
	var tail []byte
	start := size
	// Read until the tail holds limit lines after a line break, or all of f.
	for start > 0 && bytes.Count(tail, []byte{'\n'}) <= d.limit {
		n := min(start, tailChunk)
		start -= n
		chunk := make([]byte, n, int(n)+len(tail))
		if _, err := f.ReadAt(chunk, start); err != nil && err != io.EOF {
			return false, err
		}
		tail = append(chunk, tail...)
	}
	lines := bytes.Split(bytes.TrimSuffix(tail, []byte{'\n'}), []byte{'\n'})
	if start > 0 {
		lines = lines[1:] // the first may be the end of a line
	}
	lines = lines[max(0, len(lines)-d.limit):]
	for _, line := range lines {
		var ev struct {
			Source string `json:"source"`
			ID     string `json:"id"`
			Type   string `json:"type"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.ID != "" {
			d.add(dedupKey(ev.Source, ev.ID))
			ended = ended || ev.Type == sessionEnded
		}
	}
	return ended, nil
}
