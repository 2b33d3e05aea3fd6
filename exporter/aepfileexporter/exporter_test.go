package aepfileexporter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
)

// TestGoldenStreamRoundTrip: the golden stream, projected to log records
// and written, is back in its session logs line for line: each line the
// canonically equal to the golden line (numbers cross the projection as
// doubles: the §4.2 floor), and every file a valid stream.
func TestGoldenStreamRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h := startExporter(t, testConfig(dir))
	golden := aeptest.Golden(t)
	ld := plog.NewLogs()
	records := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	want := make(map[string][]aeptest.GoldenLine)
	for _, g := range golden {
		require.NoError(t, projection.ToLogRecord(g.Event, records.AppendEmpty(), projection.Options{}))
		path := filepath.Join(dir, escapeName(g.Event.Agent), segmentName(escapeName(g.Event.Session), 0))
		if g.Event.Session == "" {
			path = filepath.Join(dir, segmentName(escapeName(g.Event.Agent), 0))
		}
		want[path] = append(want[path], g)
	}
	require.NoError(t, h.exp.ConsumeLogs(t.Context(), ld))
	h.shutdown(t)

	written := 0
	for path, lines := range want {
		got := readLog(t, path)
		require.Len(t, got, len(lines), path)
		checkStream(t, got)
		for i, g := range lines {
			gotCanonical, err := aep.Canonical(mustParse(t, got[i]))
			require.NoError(t, err)
			wantCanonical, err := aep.Canonical(mustParse(t, string(g.Raw)))
			require.NoError(t, err)
			assert.Equal(t, string(wantCanonical), string(gotCanonical), "%s line %d", path, i+1)
		}
		written += len(got)
	}
	assert.Equal(t, len(golden), written)
	assert.Equal(t, int64(len(golden)), h.counter(t, "otelcol_aepfile_events_written"))
}

func mustParse(t *testing.T, line string) *aep.Event {
	t.Helper()
	ev, err := aep.Parse([]byte(line))
	require.NoError(t, err)
	return ev
}

// TestCaptureStaysAsProjected pins the redaction ceilings: without
// max_capture a line carries the capture the projection carried, payload
// and all; with it, nothing above the ceiling reaches the disk.
func TestCaptureStaysAsProjected(t *testing.T) {
	full := aeptest.MakeAttentionRequest(newEvent("s1", 0))
	tests := []struct {
		name        string
		maxCapture  aep.Capture
		wantCapture aep.Capture
		wantPrompt  bool
	}{
		{name: "no_ceiling", wantCapture: aep.CaptureFull, wantPrompt: true},
		{name: "metadata_ceiling", maxCapture: aep.CaptureMetadata, wantCapture: aep.CaptureMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.MaxCapture = tt.maxCapture
			h := startExporter(t, cfg)
			require.NoError(t, h.consume(t, full))
			h.shutdown(t)

			got := checkStream(t, readLog(t, sessionPath(dir, "s1")))
			require.Len(t, got, 1)
			assert.Equal(t, tt.wantCapture, got[0].Capture)
			assert.Equal(t, tt.wantPrompt, strings.Contains(readLog(t, sessionPath(dir, "s1"))[0], "rm -rf build/"))
		})
	}
}

func TestRedeliveriesAreWrittenOnce(t *testing.T) {
	dir := t.TempDir()
	h := startExporter(t, testConfig(dir))
	events := sessionEvents("s1", 0, 5)

	require.NoError(t, h.consume(t, events[:3]...))
	require.NoError(t, h.consume(t, events...), "a redelivered push that overlaps the last")
	require.NoError(t, h.consume(t, events[1], events[1]), "an event twice in one push")

	assert.Equal(t, idsOf(events), idsOf(checkStream(t, readLog(t, sessionPath(dir, "s1")))))
	assert.Equal(t, int64(5), h.counter(t, "otelcol_aepfile_events_written"))
	assert.Equal(t, int64(5), h.counter(t, "otelcol_aepfile_events_duplicate"))
}

// TestRestartResumesWithoutDuplicates: a new exporter over the same
// directory recovers what the last one wrote from the file's tail, so the
// redelivery of its last unconfirmed push writes nothing twice, and a torn
// last line a crash left is cut, not glued to the next.
func TestRestartResumesWithoutDuplicates(t *testing.T) {
	dir := t.TempDir()
	events := sessionEvents("s1", 0, 20)
	first := startExporter(t, testConfig(dir))
	require.NoError(t, first.consume(t, events[:10]...))
	first.shutdown(t)
	path := sessionPath(dir, "s1")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"aep":"0.1","id":"torn`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	cfg := testConfig(dir)
	cfg.DedupWindow = 8 // more than the redelivered overlap, less than the file
	second := startExporter(t, cfg)
	require.NoError(t, second.consume(t, events[5:]...))
	second.shutdown(t)

	assert.Equal(t, idsOf(events), idsOf(checkStream(t, readLog(t, path))))
	assert.Equal(t, int64(10), second.counter(t, "otelcol_aepfile_events_written"))
	assert.Equal(t, int64(5), second.counter(t, "otelcol_aepfile_events_duplicate"))
}

func TestInvalidAndForeignRecordsAreCountedNotWritten(t *testing.T) {
	dir := t.TempDir()
	h := startExporter(t, testConfig(dir))
	invalid := newEvent("s1", 1)
	invalid.ID = "no-seq"
	invalid.Seq = nil // a session-scoped event needs a seq
	ld := aeptest.LogsOf(t, newEvent("s1", 0), invalid, newEvent("s1", 2))
	foreign := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
	foreign.SetEventName("app.request")
	foreign.Body().SetStr("GET /")

	require.NoError(t, h.exp.ConsumeLogs(t.Context(), ld))

	assert.Equal(t, []string{"ev-0000", "ev-0002"}, idsOf(checkStream(t, readLog(t, sessionPath(dir, "s1")))))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aepfile_events_rejected", attribute.String("reason", "invalid")))
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aepfile_events_skipped"))
}

func TestLayout(t *testing.T) {
	dir := t.TempDir()
	h := startExporter(t, testConfig(dir))
	heartbeat := &aep.Event{
		AEP: aep.Version, ID: "hb-1", Type: "agent.heartbeat", Time: "2026-07-12T08:15:00.301Z",
		Source: "aep://otelcol-test/agent/openhands", Agent: "openhands", Data: map[string]any{"tick": json.Number("1")},
	}
	hostile := newEvent("../../etc/Passwd\x00", 0)
	hostile.Source = "aep://otelcol-test/agent/openhands/session/hostile"
	long := newEvent(strings.Repeat("é", 500), 0)
	long.Source = "aep://otelcol-test/agent/openhands/session/long"
	require.NoError(t, h.consume(t, newEvent("s1", 0), heartbeat, hostile, long))
	h.shutdown(t)

	var got []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	}))
	assert.ElementsMatch(t, []string{
		"openhands.jsonl",
		"openhands/s1.jsonl",
		"openhands/%2e%2e%2f%2e%2e%2fetc%2f%50asswd%00.jsonl",
		"openhands/" + escapeName(strings.Repeat("é", 500)) + ".jsonl",
	}, got)
	assert.Equal(t, []string{"hb-1"}, idsOf(checkStream(t, readLog(t, filepath.Join(dir, "openhands.jsonl")))))
	assert.Equal(t, int64(4), h.counter(t, "otelcol_aepfile_events_written"))
}

func TestPermissions(t *testing.T) {
	tests := []struct {
		name              string
		fileMode, dirMode string
		wantFile, wantDir os.FileMode
	}{
		{name: "defaults", wantFile: 0o600, wantDir: 0o700},
		{name: "configured", fileMode: "0640", dirMode: "0750", wantFile: 0o640, wantDir: 0o750},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The umask must not widen or narrow what is configured.
			old := syscall.Umask(0o077)
			defer syscall.Umask(old)
			dir := filepath.Join(t.TempDir(), "logs")
			cfg := testConfig(dir)
			if tt.fileMode != "" {
				cfg.FileMode, cfg.DirMode = tt.fileMode, tt.dirMode
			}
			h := startExporter(t, cfg)
			require.NoError(t, h.consume(t, newEvent("s1", 0)))

			for path, want := range map[string]os.FileMode{
				dir: tt.wantDir, filepath.Join(dir, "openhands"): tt.wantDir, sessionPath(dir, "s1"): tt.wantFile,
			} {
				st, err := os.Stat(path)
				require.NoError(t, err)
				assert.Equal(t, want, st.Mode().Perm(), path)
			}
		})
	}
}

// TestOpenFilesAreBounded: many sessions written in turn never hold more
// descriptors than max_open_files, and a log closed to open another
// continues where it stopped when its session writes again.
func TestOpenFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.MaxOpenFiles = 3
	h := startExporter(t, cfg)
	e := h.file
	const sessions, rounds = 10, 3
	for seq := range rounds {
		for s := range sessions {
			require.NoError(t, h.consume(t, newEvent(sessionName(s), int64(seq))))
			require.LessOrEqual(t, e.writer.openLogs(), 3)
			require.LessOrEqual(t, descriptorsUnder(t, dir), 3)
		}
	}
	h.shutdown(t)
	for s := range sessions {
		got := checkStream(t, readLog(t, sessionPath(dir, sessionName(s))))
		assert.Equal(t, idsOf(sessionEvents(sessionName(s), 0, rounds)), idsOf(got))
	}
}

func sessionName(i int) string { return "s" + string(rune('a'+i)) }

// descriptorsUnder counts this process's open descriptors on files under
// dir (Linux: /proc/self/fd); 0 where /proc is not there.
func descriptorsUnder(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

func TestEndedSessionIsClosedAfterTheGrace(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.EndedGrace = 50 * time.Millisecond
	h := startExporter(t, cfg)
	e := h.file
	ended := newEvent("s1", 1)
	ended.Type, ended.Run, ended.Data = "session.ended", "", map[string]any{"reason": "normal"}

	require.NoError(t, h.consume(t, newEvent("s1", 0), newEvent("s2", 0), ended))
	eventually(t, "the ended session's log is closed", func() bool { return e.writer.openLogs() == 1 })

	require.NoError(t, h.consume(t, ended), "a late redelivery")
	eventually(t, "the reopened log is closed again", func() bool { return e.writer.openLogs() == 1 })
	assert.Equal(t, []string{"ev-0000", "ev-0001"}, idsOf(checkStream(t, readLog(t, sessionPath(dir, "s1")))))
}

// TestConcurrentTailNeverSeesATornLine reads a session log while it is
// written, as tail -f does: every complete line it sees is a whole event.
func TestConcurrentTailNeverSeesATornLine(t *testing.T) {
	dir := t.TempDir()
	h := startExporter(t, testConfig(dir))
	const total = 300
	big := strings.Repeat("x", 20_000) // lines longer than a page
	events := sessionEvents("s1", 0, total)
	for _, ev := range events {
		ev.Type, ev.Run = "progress.status", ""
		ev.Data = map[string]any{"message": big}
	}
	require.NoError(t, h.consume(t, events[0]))

	var wg sync.WaitGroup
	done := make(chan struct{})
	var seen int
	var tailErr error
	wg.Go(func() {
		f, err := os.Open(sessionPath(dir, "s1"))
		if err != nil {
			tailErr = err
			return
		}
		defer f.Close()
		var pending []byte
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				if _, err := aep.Parse(pending[:i]); err != nil {
					tailErr = err
					return
				}
				seen++
				pending = pending[i+1:]
			}
			if n == 0 || err != nil {
				select {
				case <-done:
					if seen == total {
						return
					}
				default:
				}
				time.Sleep(time.Millisecond)
			}
		}
	})
	for _, ev := range events[1:] {
		require.NoError(t, h.consume(t, ev))
	}
	close(done)
	wg.Wait()
	require.NoError(t, tailErr)
	assert.Equal(t, total, seen)
}

// TestUnwritableSessionIsRetriedAlone: a session whose file cannot be
// made fails the push for its events alone, reports a recoverable status,
// and is written, in order, once the cause is gone.
func TestUnwritableSessionIsRetriedAlone(t *testing.T) {
	dir := t.TempDir()
	h := startExporter(t, testConfig(dir))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "openhands"), 0o700))
	blocker := filepath.Join(dir, "openhands", "s1.jsonl")
	require.NoError(t, os.Mkdir(blocker, 0o700)) // a directory where the log must go

	err := h.consume(t, newEvent("s1", 0), newEvent("s2", 0), newEvent("s1", 1))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err), "a file error is retryable")
	var retry consumererror.Logs
	require.ErrorAs(t, err, &retry)
	assert.Equal(t, 2, retry.Data().LogRecordCount(), "only s1's events are retried")
	assert.Equal(t, []string{"ev-0000"}, idsOf(checkStream(t, readLog(t, sessionPath(dir, "s2")))))
	assert.Contains(t, h.host.reported(), componentstatus.StatusRecoverableError)
	assert.Equal(t, int64(1), h.counter(t, "otelcol_aepfile_write_errors"))
	logged := h.logs.FilterMessage("cannot write an AEP session log (io_error)").All()
	require.Len(t, logged, 1)
	assert.Contains(t, logged[0].ContextMap()["error"], "s1.jsonl")

	require.NoError(t, os.Remove(blocker))
	require.NoError(t, h.exp.ConsumeLogs(t.Context(), retry.Data()))
	assert.Equal(t, []string{"ev-0000", "ev-0001"}, idsOf(checkStream(t, readLog(t, sessionPath(dir, "s1")))))
	statuses := h.host.reported()
	assert.Equal(t, componentstatus.StatusOK, statuses[len(statuses)-1])
}

// TestUnusableDirectoryIsReportedAtStart: a root that cannot be made is a
// log line and a recoverable status at start, not a failed start.
func TestUnusableDirectoryIsReportedAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	h := startExporter(t, testConfig(filepath.Join(file, "logs")))

	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, h.host.reported())
	assert.Len(t, h.logs.FilterMessage("cannot create an AEP session log (io_error)").All(), 1)
	require.Error(t, h.consume(t, newEvent("s1", 0)), "and writes fail, retryably")
}

func TestErrorKind(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "disk_full", err: &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, want: "disk_full"},
		{name: "quota", err: &os.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}, want: "disk_full"},
		{name: "permission", err: &os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, want: "permission_denied"},
		{name: "read_only", err: &os.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, want: "permission_denied"},
		{name: "other", err: errors.New("boom"), want: "io_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, errorKind(tt.err))
		})
	}
}

// TestFsyncPolicies: every_batch syncs before the push returns, interval
// within its period, none never.
func TestFsyncPolicies(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncEveryBatch, FsyncInterval, FsyncNone} {
		t.Run(string(policy), func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Fsync, cfg.FsyncInterval = policy, 20*time.Millisecond
			h := startExporter(t, cfg)
			require.NoError(t, h.consume(t, newEvent("s1", 0)))
			dirty := func() bool {
				w := h.file.writer
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.logs[fileKey{agent: "openhands", session: "s1"}].dirty
			}
			switch policy {
			case FsyncEveryBatch:
				assert.False(t, dirty(), "synced before the push returned")
			case FsyncInterval:
				eventually(t, "synced within the interval", func() bool { return !dirty() })
			default:
				assert.True(t, dirty())
			}
		})
	}
}

// TestWholeSessionRedeliveryIsWrittenOnce: an upstream that redelivers a
// whole session (an input re-read from its start, a replayed queue), in
// order or shuffled, into the open log, after the log was closed for the
// open-file bound, or after a restart, writes nothing twice, however long
// the session is against dedup_window; and what dedup holds for the
// session stays one range.
func TestWholeSessionRedeliveryIsWrittenOnce(t *testing.T) {
	const sessionLen = 1500
	events := sessionEvents("s1", 0, sessionLen)
	shuffled := slices.Clone(events)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	tests := []struct {
		name    string
		between func(t *testing.T, h *harness) *harness
	}{
		{name: "into the open log", between: func(_ *testing.T, h *harness) *harness { return h }},
		{name: "after the log was closed for the bound", between: func(t *testing.T, h *harness) *harness {
			require.NoError(t, h.consume(t, newEvent("other", 0)))
			return h
		}},
		{name: "after a restart", between: func(t *testing.T, h *harness) *harness {
			h.shutdown(t)
			return startExporter(t, h.cfg)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.MaxOpenFiles = 1
			cfg.DedupWindow = 64 // far shorter than the session
			h := startExporter(t, cfg)
			require.NoError(t, h.consume(t, events...))
			h = tt.between(t, h)
			require.NoError(t, h.consume(t, events...), "redelivered in order")
			require.NoError(t, h.consume(t, shuffled...), "redelivered shuffled")

			lines := readLog(t, sessionPath(dir, "s1"))
			require.Equal(t, sessionLen, len(lines), "lines in the log")
			assert.Equal(t, idsOf(events), idsOf(checkStream(t, lines)))
			assert.Equal(t, int64(2*sessionLen), h.counter(t, "otelcol_aepfile_events_duplicate"))
			h.file.writer.mu.Lock()
			defer h.file.writer.mu.Unlock()
			l, ok := h.file.writer.logs[fileKey{agent: "openhands", session: "s1"}]
			require.True(t, ok)
			assert.Equal(t, 1, l.seen.ranges, "the session's seqs, one range")
		})
	}
}

// TestNothingIsWrittenOutsideTheDirectory: a session log planted as a
// symlink (to a file outside, to /dev/zero), a FIFO in its place and an
// agent folder planted as a symlink are refused, retryably and for their
// session alone: nothing outside the directory is written, created,
// truncated or chmodded, and no open blocks.
func TestNothingIsWrittenOutsideTheDirectory(t *testing.T) {
	const partial = "a line with no end"
	tests := []struct {
		name  string
		plant func(t *testing.T, dir, outside string)
		// folder: the agent's folder is planted, so both sessions fail.
		folder bool
		// wantErr is what the error says.
		wantErr string
	}{
		{name: "session log symlinked outside", plant: func(t *testing.T, dir, outside string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "openhands"), 0o700))
			require.NoError(t, os.Symlink(filepath.Join(outside, "target"), sessionPath(dir, "s1")))
		}, wantErr: "path escapes"},
		{name: "session log symlinked to /dev/zero", plant: func(t *testing.T, dir, _ string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "openhands"), 0o700))
			require.NoError(t, os.Symlink("/dev/zero", sessionPath(dir, "s1")))
		}, wantErr: "path escapes"},
		{name: "session log symlinked inside", plant: func(t *testing.T, dir, _ string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "openhands"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "openhands", "other.jsonl"), nil, 0o600))
			require.NoError(t, os.Symlink("other.jsonl", sessionPath(dir, "s1")))
		}, wantErr: "not a regular file (a symlink, not followed)"},
		{name: "session log a FIFO", plant: func(t *testing.T, dir, _ string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "openhands"), 0o700))
			require.NoError(t, syscall.Mkfifo(sessionPath(dir, "s1"), 0o600))
		}, wantErr: "not a regular file (p"},
		{name: "agent folder symlinked outside", plant: func(t *testing.T, dir, outside string) {
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "openhands")))
		}, folder: true, wantErr: "is not a directory (L"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			target := filepath.Join(outside, "target")
			require.NoError(t, os.WriteFile(target, []byte(partial), 0o644))
			tt.plant(t, dir, outside)
			h := startExporter(t, testConfig(dir))

			err := h.consume(t, newEvent("s1", 0), newEvent("s2", 0))
			require.Error(t, err)
			assert.False(t, consumererror.IsPermanent(err), "retried once the file is fixed")
			assert.ErrorContains(t, err, tt.wantErr)
			var retry consumererror.Logs
			require.ErrorAs(t, err, &retry)
			if tt.folder {
				assert.Equal(t, 2, retry.Data().LogRecordCount(), "the agent's events")
			} else {
				assert.Equal(t, 1, retry.Data().LogRecordCount(), "s1's event alone")
				assert.Len(t, readLog(t, sessionPath(dir, "s2")), 1, "s2 is written")
			}

			raw, err := os.ReadFile(target)
			require.NoError(t, err)
			assert.Equal(t, partial, string(raw), "the file outside is untouched")
			st, err := os.Stat(target)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())
			entries, err := os.ReadDir(outside)
			require.NoError(t, err)
			assert.Len(t, entries, 1, "nothing created outside")
		})
	}
}

// TestWiderAgentFolderIsNarrowed: an agent folder the exporter finds with
// a mode wider than dir_mode (others could plant a session log in it) is
// narrowed to dir_mode, and said so; the directory itself is the
// operator's and is left as it is, with a warning.
func TestWiderAgentFolderIsNarrowed(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777))
	agentDir := filepath.Join(dir, "openhands")
	require.NoError(t, os.Mkdir(agentDir, 0o700))
	require.NoError(t, os.Chmod(agentDir, 0o777))
	h := startExporter(t, testConfig(dir))
	require.NoError(t, h.consume(t, newEvent("s1", 0)))

	st, err := os.Stat(agentDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	assert.Len(t, h.logs.FilterMessage("narrowed an existing agent folder of AEP session logs to dir_mode").All(), 1)
	st, err = os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o777), st.Mode().Perm(), "the directory is left as it is")
	assert.Len(t, h.logs.FilterMessage("the AEP session log directory is writable by other users; it is left as it is").All(), 1)
}

// TestReopenForTheBoundDoesNotReadTheLogAgain: a log closed for
// max_open_files and written again gets its dedup state back from what the
// close kept: reopening it costs a handful of allocations, not one or more
// per line of the log.
func TestReopenForTheBoundDoesNotReadTheLogAgain(t *testing.T) {
	const sessionLen = 5000
	cfg := testConfig(t.TempDir())
	cfg.MaxOpenFiles = 1
	h := startExporter(t, cfg)
	for _, session := range []string{"s0", "s1"} {
		require.NoError(t, h.consume(t, sessionEvents(session, 0, sessionLen)...))
	}
	pushes := make([]plog.Logs, 0, 20)
	for i := range cap(pushes) {
		pushes = append(pushes, aeptest.LogsOf(t, newEvent(fmt.Sprintf("s%d", i%2), int64(sessionLen+i/2))))
	}
	next := 0
	allocs := testing.AllocsPerRun(len(pushes)-1, func() {
		require.NoError(t, h.file.pushLogs(t.Context(), pushes[next]))
		next++
	})
	assert.Less(t, allocs, float64(sessionLen/10), "allocations to close one log and reopen the other")
	assert.Equal(t, int64(2*sessionLen+len(pushes)), h.counter(t, "otelcol_aepfile_events_written"))
}

// TestRemovedDirectoryIsMadeAgain: a directory removed behind the
// exporter's back fails the next push retryably, and the retry makes it
// again and writes.
func TestRemovedDirectoryIsMadeAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	h := startExporter(t, testConfig(dir))
	require.NoError(t, h.consume(t, newEvent("s1", 0)))
	require.NoError(t, os.RemoveAll(dir))

	err := h.consume(t, newEvent("s2", 0))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	require.NoError(t, h.consume(t, newEvent("s2", 0)), "the retry")
	assert.Len(t, readLog(t, sessionPath(dir, "s2")), 1)
}

// TestReusedPositionIsWritten: an event at a position just written under
// another id (an emitter that reused the position) is another event and is
// written; a redelivery of either is not.
func TestReusedPositionIsWritten(t *testing.T) {
	dir := t.TempDir()
	h := startExporter(t, testConfig(dir))
	first := newEvent("s1", 5)
	reused := *first
	reused.ID = "ev-reused"
	require.NoError(t, h.consume(t, first, &reused))
	require.NoError(t, h.consume(t, first, &reused))

	// Not a valid stream (AEP-0001 §7 forbids the reuse), but nothing lost.
	var ids []string
	for _, line := range readLog(t, sessionPath(dir, "s1")) {
		ev, err := aep.Parse([]byte(line))
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	assert.Equal(t, []string{first.ID, reused.ID}, ids)
	assert.Equal(t, int64(2), h.counter(t, "otelcol_aepfile_events_duplicate"))
}
