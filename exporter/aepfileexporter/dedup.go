package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/otelcol-openhands/otelcol-openhands/internal/recent"
)

// dedup remembers the last limit (source, id) pairs written to one file:
// an at-least-once upstream redelivers, and a redelivered event is not
// written twice. A limit of 0 remembers nothing.
type dedup struct {
	recent.Window[struct{}]
}

func newDedup(limit int) *dedup {
	return &dedup{recent.New[struct{}](limit)}
}

func dedupKey(source, id string) string { return source + "\x00" + id }

func (d *dedup) has(key string) bool { return d.Has(key) }

func (d *dedup) add(key string) { d.Put(key, struct{}{}) }

// tailChunk is how much of a file is read at a time, from its end, to
// recover the keys of its last lines.
const tailChunk = 64 << 10

// recover adds to d the keys of lines, oldest first, and reports whether
// one of them is a session.ended. A line that is not an event (a file
// someone else wrote to) is passed over.
func (d *dedup) recover(lines [][]byte) (ended bool) {
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
	return ended
}

// lastLines returns up to n of the last lines of r, whose size bytes end
// with a complete line, reading back from the end a chunk at a time. It
// reads until it holds more than n line ends (or the whole file), so the
// first line it holds, which may be cut, is never among the last n.
func lastLines(r io.ReaderAt, size int64, n int) ([][]byte, error) {
	if n <= 0 || size == 0 {
		return nil, nil
	}
	var tail []byte
	start := size
	for start > 0 && bytes.Count(tail, []byte{'\n'}) <= n {
		chunk := min(start, tailChunk)
		start -= chunk
		buf := make([]byte, chunk, int(chunk)+len(tail))
		if _, err := r.ReadAt(buf, start); err != nil && err != io.EOF {
			return nil, err
		}
		tail = append(buf, tail...)
	}
	lines := bytes.Split(bytes.TrimSuffix(tail, []byte{'\n'}), []byte{'\n'})
	return lines[max(0, len(lines)-n):], nil
}

// segmentLines returns up to n of the last lines of a closed segment,
// plain or gzipped; none if it is gone.
func segmentLines(path string, n int) ([][]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return gzipLines(path+".gz", n)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	end, err := lastLineEnd(f, st.Size())
	if err != nil {
		return nil, err
	}
	return lastLines(f, end, n)
}

// gzipLines returns up to n of the last complete lines of a gzipped
// segment; none if it is gone.
func gzipLines(path string, n int) ([][]byte, error) {
	raw, err := readGzip(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
	return lastLines(bytes.NewReader(raw), int64(len(raw)), n)
}

// readGzip reads a gzipped file whole.
func readGzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
