package aepfileexporter

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// segments reads a session log's segments in order, plain or gzipped,
// and returns their names and lines.
func segments(t *testing.T, dir, session string) (names, lines []string) {
	t.Helper()
	stem := escapeName(session)
	for n := 0; ; n++ {
		path := filepath.Join(dir, "openhands", segmentName(stem, n))
		raw, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			path += ".gz"
			var compressed []byte
			if compressed, err = os.ReadFile(path); os.IsNotExist(err) {
				return names, lines
			}
			require.NoError(t, err)
			zr, gzErr := gzip.NewReader(bytes.NewReader(compressed))
			require.NoError(t, gzErr)
			raw, err = io.ReadAll(zr)
		}
		require.NoError(t, err)
		names = append(names, filepath.Base(path))
		require.True(t, strings.HasSuffix(string(raw), "\n"), path)
		lines = append(lines, strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")...)
	}
}

// TestRotationKeepsOrder: a log past rotate_bytes continues in
// {session}.1.jsonl, {session}.2.jsonl, …; read in that order the
// segments are the session's stream, also across a restart, which
// continues in the last segment.
func TestRotationKeepsOrder(t *testing.T) {
	dir := t.TempDir()
	line, err := newEvent("s1", 0).MarshalJSON()
	require.NoError(t, err)
	cfg := testConfig(dir)
	cfg.RotateBytes = int64(2*len(line) + 10) // two lines a segment
	events := sessionEvents("s1", 0, 9)

	first := startExporter(t, cfg)
	require.NoError(t, first.consume(t, events[:5]...))
	first.shutdown(t)
	second := startExporter(t, cfg)
	require.NoError(t, second.consume(t, events[3:]...), "a redelivery across the restart")
	second.shutdown(t)

	names, lines := segments(t, dir, "s1")
	assert.Equal(t, []string{"s1.jsonl", "s1.1.jsonl", "s1.2.jsonl", "s1.3.jsonl", "s1.4.jsonl"}, names)
	assert.Equal(t, idsOf(events), idsOf(checkStream(t, lines)))
	assert.Equal(t, int64(2), first.counter(t, "otelcol_aepfile_files_rotated"))
	assert.Equal(t, int64(2), second.counter(t, "otelcol_aepfile_files_rotated"))
	for _, name := range names {
		st, err := os.Stat(filepath.Join(dir, "openhands", name))
		require.NoError(t, err)
		assert.LessOrEqual(t, st.Size(), cfg.RotateBytes, name)
	}
}

func TestLineLargerThanRotateBytesHasASegmentOfItsOwn(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.RotateBytes = 10
	h := startExporter(t, cfg)
	events := sessionEvents("s1", 0, 3)
	require.NoError(t, h.consume(t, events...))
	h.shutdown(t)

	names, lines := segments(t, dir, "s1")
	assert.Equal(t, []string{"s1.jsonl", "s1.1.jsonl", "s1.2.jsonl"}, names)
	assert.Equal(t, idsOf(events), idsOf(checkStream(t, lines)))
}

// TestEndedSessionIsCompressed: with compress_ended, an ended session's
// segments are gzipped once its log is closed, and a late event continues
// the log in a new plain segment after them.
func TestEndedSessionIsCompressed(t *testing.T) {
	// The umask must not narrow the configured mode of a compressed segment.
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.CompressEnded = true
	cfg.FileMode = "0640"
	cfg.EndedGrace = 10 * time.Millisecond
	line, err := newEvent("s1", 0).MarshalJSON()
	require.NoError(t, err)
	cfg.RotateBytes = int64(2*len(line) + 10)
	h := startExporter(t, cfg)
	ended := newEvent("s1", 3)
	ended.Type, ended.Run, ended.Data = "session.ended", "", map[string]any{"reason": "normal"}

	require.NoError(t, h.consume(t, append(sessionEvents("s1", 0, 3), ended)...))
	eventually(t, "the ended session's segments are compressed", func() bool {
		names, _ := segments(t, dir, "s1")
		return len(names) == 2 && strings.HasSuffix(names[0], ".gz") && strings.HasSuffix(names[1], ".gz")
	})
	late := newEvent("s1", 4)
	late.ID = "late"
	require.NoError(t, h.consume(t, ended, late), "a redelivery and a late event")
	h.shutdown(t)

	names, lines := segments(t, dir, "s1")
	assert.Equal(t, []string{"s1.jsonl.gz", "s1.1.jsonl.gz", "s1.2.jsonl"}, names)
	assert.Equal(t, []string{"ev-0000", "ev-0001", "ev-0002", "ev-0003", "late"}, idsOf(checkStream(t, lines)))
	assert.Equal(t, int64(2), h.counter(t, "otelcol_aepfile_files_compressed"))
	st, err := os.Stat(filepath.Join(dir, "openhands", "s1.jsonl.gz"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), st.Mode().Perm())
}

// TestUntouchedLogsAreDeleted: past max_age a closed log goes, all its
// segments together; an open log stays, however old its files, and so do
// files this exporter did not write.
func TestUntouchedLogsAreDeleted(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxOpenFiles = 1
	line, err := newEvent("s1", 0).MarshalJSON()
	require.NoError(t, err)
	cfg.RotateBytes = int64(len(line) + 10)
	h := startExporter(t, cfg)
	require.NoError(t, h.consume(t, sessionEvents("closed", 0, 2)...))
	require.NoError(t, h.consume(t, sessionEvents("open", 0, 2)...)) // closes "closed": one open file
	foreign := filepath.Join(dir, "openhands", "notes.txt")
	require.NoError(t, os.WriteFile(foreign, []byte("mine"), 0o600))
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "openhands", "closed.jsonl"), old, old))

	removed, err := h.file.writer.removeUntouched(time.Now(), time.Hour)
	require.NoError(t, err)
	assert.Zero(t, removed, "closed.1.jsonl was written within the hour: no segment of the log goes")

	removed, err = h.file.writer.removeUntouched(time.Now().Add(2*time.Hour), time.Hour)
	require.NoError(t, err)

	assert.Equal(t, 2, removed)
	names, _ := segments(t, dir, "closed")
	assert.Empty(t, names)
	names, _ = segments(t, dir, "open")
	assert.Equal(t, []string{"open.jsonl", "open.1.jsonl"}, names)
	assert.FileExists(t, foreign)

	removed, err = h.file.writer.removeUntouched(time.Now(), time.Hour)
	require.NoError(t, err)
	assert.Zero(t, removed, "nothing is untouched for an hour yet")
}

func TestMaxAgeSweepRuns(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxAge = 20 * time.Millisecond
	cfg.EndedGrace = 0
	h := startExporter(t, cfg)
	ended := newEvent("s1", 1)
	ended.Type, ended.Run, ended.Data = "session.ended", "", map[string]any{"reason": "normal"}
	require.NoError(t, h.consume(t, newEvent("s1", 0), ended))

	eventually(t, "the ended session's log is deleted", func() bool {
		_, err := os.Stat(sessionPath(dir, "s1"))
		return os.IsNotExist(err)
	})
	eventually(t, "the deletion is counted", func() bool { return h.counter(t, "otelcol_aepfile_files_deleted") == 1 })
}

func TestStemOf(t *testing.T) {
	tests := []struct {
		name, file, want string
		ok               bool
	}{
		{name: "first_segment", file: "s1.jsonl", want: "s1", ok: true},
		{name: "later_segment", file: "s1.12.jsonl", want: "s1", ok: true},
		{name: "compressed", file: "s1.1.jsonl.gz", want: "s1", ok: true},
		{name: "compression_left_by_a_crash", file: "s1.jsonl.gz.tmp", want: "s1", ok: true},
		{name: "escaped", file: "%41b.jsonl", want: "%41b", ok: true},
		{name: "foreign_extension", file: "notes.txt"},
		{name: "foreign_segment", file: "s1.x.jsonl"},
		{name: "no_stem", file: ".jsonl"},
		{name: "no_dot", file: "s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := stemOf(tt.file)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestCompressionHoldsOnlyItsSession: while a log is being compressed,
// other sessions are written, and a write to that log waits until the
// compression is done.
func TestCompressionHoldsOnlyItsSession(t *testing.T) {
	dir := t.TempDir()
	h := startExporter(t, testConfig(dir))
	w := h.file.writer
	stem := filepath.Join("openhands", "s1") // relative to the directory
	w.mu.Lock()
	w.compressing[stem] = struct{}{}
	w.mu.Unlock()

	blocked := make(chan error, 1)
	go func() { blocked <- h.consume(t, newEvent("s1", 0)) }()
	require.NoError(t, h.consume(t, newEvent("s2", 0)), "another session is written meanwhile")
	select {
	case err := <-blocked:
		t.Fatalf("the write to the log being compressed did not wait (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}

	w.mu.Lock()
	delete(w.compressing, stem)
	w.mu.Unlock()
	w.compressedOne.Broadcast()
	select {
	case err := <-blocked:
		require.NoError(t, err)
	case <-time.After(testTimeout):
		t.Fatal("the write never resumed")
	}
	assert.Len(t, readLog(t, sessionPath(dir, "s1")), 1)
}
