package aepreceiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
)

// waitFor bounds every wait for the tailer; generous, as the machine may
// be loaded. Waits end on the awaited state, never on the clock.
const waitFor = 30 * time.Second

func tailing(dir string, storage *component.ID) harnessOption {
	return func(c *Config) {
		c.JSONL = JSONLConfig{Directory: dir, PollInterval: 10 * time.Millisecond, Storage: storage}
	}
}

// sessionLog is {dir}/claude-code/s1.jsonl.
func sessionLog(t *testing.T, dir string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "claude-code"), 0o755))
	return filepath.Join(dir, "claude-code", "s1.jsonl")
}

func appendTo(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// awaitIDs waits until the records received are exactly ids, in order.
func (h *harness) awaitIDs(ids ...string) {
	h.t.Helper()
	var got []string
	require.Eventually(h.t, func() bool {
		got = idsOf(h.records())
		return len(got) >= len(ids)
	}, waitFor, 10*time.Millisecond, "awaiting %v", ids)
	assert.Equal(h.t, ids, got)
}

// idsOf is the event ids of records, in order.
func idsOf(records []receivedRecord) []string {
	ids := make([]string, 0, len(records))
	for _, r := range records {
		id, _ := r.lr.Attributes().Get(projection.AttrEventID)
		ids = append(ids, id.Str())
	}
	return ids
}

// awaitShutdown shuts the receiver down and fails unless that completes.
func (h *harness) awaitShutdown() {
	h.t.Helper()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.stopReceiver()
	}()
	select {
	case <-stopped:
	case <-time.After(waitFor):
		h.t.Fatal("shutdown did not complete")
	}
}

// The tailer passes on complete lines in order, holds a line still being
// written until its newline, and skips (counting) what it cannot pass on:
// an invalid line, a line of another AEP version, a command.
func TestJSONLTailsSessionLogs(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	third := event("e3", 3, "run.started", `{}`)
	appendTo(t, path, ndjson(toolRequested, runStarted))
	appendTo(t, path, third[:20])

	h := newHarness(t, nil, nil, tailing(dir, nil))
	h.awaitIDs("e1", "e2")

	newer := bytes.Replace(event("v2", 4, "run.started", `{}`), []byte(`"aep":"0.1"`), []byte(`"aep":"0.2"`), 1)
	invalid := bytes.Replace(event("bad", 5, "run.started", `{}`), []byte(`"seq":5,`), nil, 1)
	command := []byte(`{"aep":"0.1","id":"c1","type":"control.pause","time":"2026-07-03T10:15:03Z","source":"aep://ops/agent/mission-control","agent":"mission-control","session":"s1"}`)
	appendTo(t, path, append(third[20:], '\n'))
	appendTo(t, path, ndjson(newer, invalid, command, newer, event("e6", 6, "run.started", `{}`)))
	h.awaitIDs("e1", "e2", "e3", "e6")
	h.stopReceiver()

	assert.Equal(t, int64(2), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonVersion)))
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("unsupported AEP version").Len(), "reported once per file")
	assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonInvalid)))
	assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonCommand)))
	assert.Equal(t, int64(4), h.counter("otelcol_aepreceiver_events_accepted"))
}

// A file's offset moves only once the pipeline took its lines: refused
// for now, they are read again, and arrive once, in order.
func TestJSONLBackpressureLosesNothing(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	var next *switchableConsumer
	refusals := make(chan struct{}, 1)
	h := newHarness(t, func(sink *consumertest.LogsSink) consumer.Logs {
		next = &switchableConsumer{LogsSink: sink, refused: refusals}
		next.set(errors.New("data refused due to high memory usage"))
		return next
	}, nil, tailing(dir, nil))

	invalid := bytes.Replace(event("bad", 5, "run.started", `{}`), []byte(`"seq":5,`), nil, 1)
	appendTo(t, path, ndjson(toolRequested, invalid, runStarted))
	for range 2 { // offered, then read again
		select {
		case <-refusals:
		case <-time.After(waitFor):
			t.Fatal("the tailer never offered the lines")
		}
	}
	assert.Empty(t, h.records())
	next.set(nil)
	h.awaitIDs("e1", "e2")
	h.stopReceiver()
	assert.Positive(t, h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonBackpressure)))
	assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonInvalid)),
		"a line skipped in a batch read again is counted once")
}

// With a storage extension a restart resumes at the stored offset: the
// lines read before it are not sent again. A file that shrank below its
// offset is read again from its start.
func TestJSONLResumesFromStorage(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	storageID := component.MustNewID("file_storage")
	host := hosttest.Extensions{storageID: hosttest.FileStorage(t, t.TempDir())}

	appendTo(t, path, ndjson(toolRequested, runStarted))
	first := newHarness(t, nil, host, tailing(dir, &storageID))
	first.awaitIDs("e1", "e2")
	first.stop()

	appendTo(t, path, ndjson(event("e3", 3, "run.started", `{}`)))
	second := newHarness(t, nil, host, tailing(dir, &storageID))
	second.awaitIDs("e3")
	second.stop()

	require.NoError(t, os.WriteFile(path, ndjson(event("e9", 0, "run.started", `{}`)), 0o644))
	third := newHarness(t, nil, host, tailing(dir, &storageID))
	third.awaitIDs("e9")
}

// Without storage a restart reads every file from its start again: a
// redelivery, which consumers dedupe.
func TestJSONLWithoutStorageReadsAgain(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	appendTo(t, path, ndjson(toolRequested))
	first := newHarness(t, nil, nil, tailing(dir, nil))
	first.awaitIDs("e1")
	first.stop()
	second := newHarness(t, nil, nil, tailing(dir, nil))
	second.awaitIDs("e1")
}

// The golden stream written as a session log comes back through the
// projection's inverse byte for byte after canonical JSON.
func TestJSONLGoldenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	var sent [][]byte
	for _, g := range aeptest.Golden(t) {
		if !aep.IsCommand(g.Event.Type) {
			sent = append(sent, g.Raw)
		}
	}
	appendTo(t, sessionLog(t, dir), ndjson(sent...))
	h := newHarness(t, nil, nil, tailing(dir, nil), func(c *Config) { c.Capture.Level = aep.CaptureFull })
	require.Eventually(t, func() bool { return len(h.records()) >= len(sent) }, waitFor, 10*time.Millisecond)
	assertRoundTrip(t, sent, h.records())
}

func TestJSONLStorageMustExist(t *testing.T) {
	missing := component.MustNewID("file_storage")
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	tailing(t.TempDir(), &missing)(cfg)
	r, err := newReceiver(cfg, receivertest.NewNopSettings(componentType), consumertest.NewNop())
	require.NoError(t, err)
	assert.ErrorContains(t, r.Start(context.Background(), componenttest.NewNopHost()), "jsonl.storage")
	assert.NoError(t, r.Shutdown(context.Background()))
}

// A session log removed from the directory is forgotten at the next
// round, so rotated logs do not pile up in the tailer's memory.
func TestJSONLForgetsRemovedFiles(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	appendTo(t, path, ndjson(toolRequested))
	sink := new(consumertest.LogsSink)
	r := unstartedTailer(t, dir, sink)

	r.tailer.round(context.Background())
	assert.Len(t, r.tailer.files, 1)
	assert.Equal(t, 1, sink.LogRecordCount())
	require.NoError(t, os.Remove(path))
	r.tailer.round(context.Background())
	assert.Empty(t, r.tailer.files)
}

// Only regular files inside the directory are tailed. A FIFO, a symlink
// to /dev/zero, a symlink to a log outside the directory and a symlinked
// agent folder are skipped and reported; the real logs beside them keep
// being tailed, round after round, and shutdown completes.
func TestJSONLTailsRegularFilesInsideTheDirectoryOnly(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	path := sessionLog(t, dir)
	appendTo(t, path, ndjson(toolRequested))
	agentDir := filepath.Join(dir, "claude-code")
	require.NoError(t, syscall.Mkfifo(filepath.Join(agentDir, "a-fifo.jsonl"), 0o600))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(agentDir, "b-zero.jsonl")))
	stray := filepath.Join(outside, "stray.jsonl")
	appendTo(t, stray, ndjson(event("outside", 9, "run.started", `{}`)))
	require.NoError(t, os.Symlink(stray, filepath.Join(agentDir, "c-outside.jsonl")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "a-linked-agent")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "agent-fifo.jsonl"), 0o600))

	h := newHarness(t, nil, nil, tailing(dir, nil))
	h.awaitIDs("e1")
	appendTo(t, path, ndjson(runStarted))
	h.awaitIDs("e1", "e2")

	h.awaitShutdown()
	assert.Positive(t, h.logs.FilterMessageSnippet("not a regular file").Len())
}

// A huge file with no newline (a 1 TiB sparse file, the regular-file form
// of /dev/zero) is read a bounded slice per round: the logs after it keep
// being tailed, its over-long line is counted once, and shutdown
// completes. It was read whole every round, and never passed.
func TestJSONLHugeLineDoesNotStallTheOthers(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	appendTo(t, path, ndjson(toolRequested))
	big, err := os.Create(filepath.Join(dir, "claude-code", "a-big.jsonl"))
	require.NoError(t, err)
	require.NoError(t, big.Truncate(1<<40))
	require.NoError(t, big.Close())

	h := newHarness(t, nil, nil, tailing(dir, nil))
	h.awaitIDs("e1")
	appendTo(t, path, ndjson(runStarted))
	h.awaitIDs("e1", "e2")
	assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonTooLarge)), "the over-long line is counted once")

	h.awaitShutdown()
}

// The rest of a line counted too long while it was still being written is
// passed over when its newline comes: counted once, and the lines after it
// are read.
func TestJSONLRestOfALongLineIsPassedOver(t *testing.T) {
	const maxBody = 4 << 10
	dir := t.TempDir()
	path := sessionLog(t, dir)
	long := bytes.Repeat([]byte("a"), 20*maxBody)
	appendTo(t, path, long)
	h := newHarness(t, nil, nil, tailing(dir, nil), func(c *Config) { c.MaxRequestBodySize = maxBody })
	require.Eventually(t, func() bool {
		return h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonTooLarge)) == 1
	}, waitFor, 10*time.Millisecond)
	appendTo(t, path, append(long, '\n'))
	appendTo(t, path, ndjson(toolRequested))
	h.awaitIDs("e1")
	assert.Equal(t, int64(1), h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonTooLarge)))
	assert.Zero(t, h.counter("otelcol_aepreceiver_events_refused", attribute.String("reason", reasonInvalid)))
}

// A batch is bounded in bytes as well as in lines: lines of a third of
// max_request_body_size go to the pipeline at most three to a call, so a
// round never holds more than about the body limit.
func TestJSONLBatchIsBoundedInBytes(t *testing.T) {
	const maxBody = 64 << 10
	dir := t.TempDir()
	path := sessionLog(t, dir)
	pad := strings.Repeat("a", maxBody/3-300)
	var ids []string
	for i := range 10 {
		id := fmt.Sprintf("big%d", i)
		ids = append(ids, id)
		appendTo(t, path, ndjson(event(id, i, "x.test.tool.blob", fmt.Sprintf(`{"pad":%q}`, pad))))
	}
	h := newHarness(t, nil, nil, tailing(dir, nil), func(c *Config) { c.MaxRequestBodySize = maxBody })
	h.awaitIDs(ids...)
	for _, ld := range h.sink.AllLogs() {
		assert.LessOrEqual(t, ld.LogRecordCount(), 3, "records handed to the pipeline at once")
	}
}

// A round reads a file up to the size it had when the round opened it: a
// log that grows as fast as it is read (here, the pipeline appends a line
// each time it takes one) does not hold up the logs after it.
func TestJSONLRoundReadsAFileUpToItsSizeAtOpen(t *testing.T) {
	dir := t.TempDir()
	growing := filepath.Join(dir, "a-agent.jsonl")
	appendTo(t, growing, ndjson(event("grow-0", 0, "run.started", `{}`)))
	appendTo(t, sessionLog(t, dir), ndjson(toolRequested))
	sink := new(consumertest.LogsSink)
	appended := 0
	grow := consumer.ConsumeLogsFunc(func(ctx context.Context, ld plog.Logs) error {
		if appended < maxLinesPerBatch*3 {
			appended++
			appendTo(t, growing, ndjson(event(fmt.Sprintf("grow-%d", appended), appended, "run.started", `{}`)))
		}
		return sink.ConsumeLogs(ctx, ld)
	})
	c, err := consumer.NewLogs(grow)
	require.NoError(t, err)
	r := unstartedTailer(t, dir, c)

	r.tailer.round(context.Background())
	assert.Equal(t, 2, sink.LogRecordCount(), "one line of each log; the growing one waits for the next round")
}

// A log the aepfile exporter compressed once its session ended
// ({session}.jsonl.gz in place of {session}.jsonl) is the same log: read
// from the plain log's offset, never again once read to its end, and read
// whole by a receiver that never saw the plain log.
func TestJSONLReadsCompressedLogs(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	third := event("e3", 3, "run.started", `{}`)
	appendTo(t, path, ndjson(toolRequested, runStarted))
	sink := new(consumertest.LogsSink)
	r := unstartedTailer(t, dir, sink)
	r.tailer.round(context.Background())
	require.Equal(t, 2, sink.LogRecordCount())

	// Compressed with a line the plain log got after the last round.
	writeGzip(t, path+".gz", ndjson(toolRequested, runStarted, third))
	r.tailer.round(context.Background())
	assert.Equal(t, 2, sink.LogRecordCount(), "while both are there, the plain log is read")
	require.NoError(t, os.Remove(path))
	r.tailer.round(context.Background())
	r.tailer.round(context.Background())
	assert.Equal(t, 3, sink.LogRecordCount(), "the .gz goes on at the plain log's offset, once")
	// Read to its end, an unchanged .gz is not decompressed again (a
	// gzip reader alone takes over 32 KB).
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		r.tailer.round(context.Background())
	}
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(10*32<<10), "bytes allocated by 10 rounds")

	freshSink := new(consumertest.LogsSink)
	fresh := unstartedTailer(t, dir, freshSink)
	fresh.tailer.round(context.Background())
	assert.Equal(t, 3, freshSink.LogRecordCount(), "read whole by a receiver that never saw the plain log")
}

// A .gz is written once: its last line is read even without a newline
// (a plain log's waits for one), or it would never be.
func TestJSONLReadsTheUnterminatedLastLineOfACompressedLog(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	writeGzip(t, path+".gz", bytes.TrimSuffix(ndjson(toolRequested, runStarted), []byte("\n")))
	sink := new(consumertest.LogsSink)
	r := unstartedTailer(t, dir, sink)
	r.tailer.round(context.Background())
	r.tailer.round(context.Background())
	assert.Equal(t, 2, sink.LogRecordCount())
}

// The aepfile exporter's rotated segments of a log ({session}.jsonl, then
// {session}.1.jsonl, … {session}.10.jsonl) are read in segment order, not
// in the order of their names ("s1.1.jsonl" sorts before "s1.jsonl"), so a
// session caught up on in one round keeps its seq order.
func TestJSONLReadsSegmentsInOrder(t *testing.T) {
	dir := t.TempDir()
	path := sessionLog(t, dir)
	stem := strings.TrimSuffix(path, ".jsonl")
	var ids []string
	for n := range 11 {
		id := fmt.Sprintf("seg%d", n)
		ids = append(ids, id)
		name := path
		if n > 0 {
			name = fmt.Sprintf("%s.%d.jsonl", stem, n)
		}
		appendTo(t, name, ndjson(event(id, n, "run.started", `{}`)))
	}
	require.NoError(t, os.Rename(fmt.Sprintf("%s.%d.jsonl", stem, 3), fmt.Sprintf("%s.%d.jsonl.gz", stem, 3)))
	writeGzip(t, fmt.Sprintf("%s.%d.jsonl.gz", stem, 3), ndjson(event("seg3", 3, "run.started", `{}`)))
	sink := new(consumertest.LogsSink)
	r := unstartedTailer(t, dir, sink)
	r.tailer.round(context.Background())
	assert.Equal(t, ids, idsOf(receivedBy(sink)))
}

// writeGzip writes data, gzipped, to path.
func writeGzip(t *testing.T, path string, data []byte) {
	t.Helper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(path, gz.Bytes(), 0o600))
}

// unstartedTailer is a receiver tailing dir into next whose rounds the
// test runs itself, one at a time.
func unstartedTailer(t *testing.T, dir string, next consumer.Logs) *aepReceiver {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	tailing(dir, nil)(cfg)
	r, err := newReceiver(cfg, receivertest.NewNopSettings(componentType), next)
	require.NoError(t, err)
	r.maxBody = 1 << 20 // what Start reads from confighttp; rounds run here without it
	return r
}
