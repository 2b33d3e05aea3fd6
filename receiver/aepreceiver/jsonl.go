package aepreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/storageclient"
)

// JSONLConfig tails AEP session logs (the JSONL binding, AEP-0003 §3.1).
type JSONLConfig struct {
	// Directory holds the session logs as {agent}/{session}.jsonl; empty
	// turns tailing off.
	Directory string `mapstructure:"directory"`
	// PollInterval is how often the directory is listed and each file
	// read past its offset.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// Storage is the id of a storage extension (file_storage) that keeps
	// each file's offset across restarts; without it a restart reads every
	// file again from its start.
	Storage *component.ID `mapstructure:"storage"`
}

// maxLinesPerBatch bounds one call to the pipeline from one file.
const maxLinesPerBatch = 1000

// tailer reads each session log past the offset of its first unread byte
// and passes its complete lines on; a line still being written (no
// newline yet) waits for the next round. Each file's offset moves only
// once the pipeline took its lines, so backpressure delays them and a
// crash resends them, never loses them.
type tailer struct {
	r       *aepReceiver
	cfg     JSONLConfig
	obsrecv *receiverhelper.ObsReport
	client  storage.Client // nil keeps offsets in memory only
	files   map[string]*tailedFile

	cancel context.CancelFunc
	done   chan struct{}
}

type tailedFile struct {
	offset int64
	// versionReported: a line of an unsupported version was reported
	// (AEP-0003 §3.1: skip it, report it once).
	versionReported bool
}

func newTailer(r *aepReceiver, cfg JSONLConfig) (*tailer, error) {
	obsrecv, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: r.set.ID, Transport: "file", ReceiverCreateSettings: r.set,
	})
	if err != nil {
		return nil, fmt.Errorf("aep receiver obsreport: %w", err)
	}
	return &tailer{r: r, cfg: cfg, obsrecv: obsrecv, files: make(map[string]*tailedFile)}, nil
}

func (t *tailer) start(ctx context.Context, host component.Host) error {
	if t.cfg.Storage != nil {
		client, err := storageclient.Get(ctx, host, *t.cfg.Storage, component.KindReceiver, t.r.set.ID)
		if err != nil {
			return fmt.Errorf("jsonl.storage: %w", err)
		}
		t.client = client
	}
	runCtx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	go t.run(runCtx)
	return nil
}

func (t *tailer) shutdown(ctx context.Context) error {
	if t.cancel != nil {
		t.cancel()
		<-t.done
	}
	if t.client != nil {
		return t.client.Close(ctx)
	}
	return nil
}

func (t *tailer) run(ctx context.Context) {
	defer close(t.done)
	ticker := time.NewTicker(t.cfg.PollInterval)
	defer ticker.Stop()
	for {
		t.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// round reads every session log once, in path order.
func (t *tailer) round(ctx context.Context) {
	paths, err := filepath.Glob(filepath.Join(t.cfg.Directory, "*", "*.jsonl"))
	if err != nil {
		t.r.rl.Error("jsonl:glob", "cannot list the JSONL directory", zap.Error(err))
		return
	}
	slices.Sort(paths)
	for path := range t.files {
		if _, listed := slices.BinarySearch(paths, path); !listed {
			delete(t.files, path) // removed; its stored offset stays, in case it comes back
		}
	}
	for _, path := range paths {
		if ctx.Err() != nil {
			return
		}
		t.tail(ctx, path)
	}
}

// tail passes on the complete lines of one file past its offset, a batch
// at a time, until the file is read or the pipeline refuses for now.
func (t *tailer) tail(ctx context.Context, path string) {
	f, ok := t.files[path]
	if !ok {
		f = &tailedFile{offset: t.loadOffset(ctx, path)}
		t.files[path] = f
	}
	file, err := t.openAt(path, f)
	if err != nil {
		t.r.rl.Warn("jsonl:open:"+path, "cannot open a JSONL session log", zap.String("path", path), zap.Error(err))
		return
	}
	defer file.Close()
	br := bufio.NewReaderSize(file, 64<<10)
	for ctx.Err() == nil {
		lines, read, err := readLines(br, maxLinesPerBatch, t.r.maxBody)
		if err != nil {
			t.r.rl.Warn("jsonl:read:"+path, "cannot read a JSONL session log", zap.String("path", path), zap.Error(err))
			return
		}
		if read == 0 {
			return
		}
		if !t.pass(ctx, path, f, lines) {
			return
		}
		f.offset += read
		// Stored even while shutting down: the lines have left.
		t.storeOffset(context.WithoutCancel(ctx), path, f.offset)
	}
}

// openAt opens path at f's offset, which it resets when the file shrank
// below it.
func (t *tailer) openAt(path string, f *tailedFile) (*os.File, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	info, err := file.Stat()
	if err == nil && info.Size() < f.offset {
		// Truncated or rewritten: an append-only log does neither, so
		// what it holds now is new.
		t.r.set.Logger.Warn("a JSONL session log shrank below its offset; reading it again from the start",
			zap.String("path", path), zap.Int64("offset", f.offset), zap.Int64("size", info.Size()))
		f.offset = 0
	}
	if err == nil {
		_, err = file.Seek(f.offset, io.SeekStart)
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// pass checks lines and hands the admitted ones to the pipeline. It
// reports whether the file may move past them: false when the pipeline
// refused for now (the lines are read again next round).
func (t *tailer) pass(ctx context.Context, path string, f *tailedFile, lines []jsonlLine) bool {
	records := newRecordBuilder()
	// Skipped lines are reported once the batch is settled, so that a
	// batch read again after backpressure does not count them twice.
	var skipped []skippedLine
	defer func() {
		for _, s := range skipped {
			t.skip(ctx, path, f, s)
		}
	}()
	for _, line := range lines {
		if line.tooLong {
			skipped = append(skipped, skippedLine{reason: reasonTooLarge,
				err: fmt.Errorf("the line is longer than max_request_body_size (%d bytes)", t.r.maxBody)})
			continue
		}
		if len(bytes.TrimSpace(line.raw)) == 0 {
			continue // a blank line carries no event
		}
		agent, lr, down, reason, err := t.r.project(line.raw)
		if err != nil {
			skipped = append(skipped, skippedLine{raw: line.raw, reason: reason, err: err})
			continue
		}
		records.add(agent, lr, down)
	}
	if records.logs.LogRecordCount() == 0 {
		return true
	}
	n, err := t.r.handOff(ctx, t.obsrecv, records)
	switch {
	case err == nil:
		return true
	case consumererror.IsPermanent(err):
		t.r.rl.Error("jsonl:"+reasonPipeline, "the pipeline permanently refused AEP events of a JSONL session log; they are skipped",
			zap.String("path", path), zap.Int("events", n), zap.Error(err))
		return true
	default:
		skipped = nil
		t.r.rl.Warn("jsonl:"+reasonBackpressure, "the pipeline refused AEP events of a JSONL session log for now; they are read again next round",
			zap.String("path", path), zap.Int("events", n), zap.Error(err))
		return false
	}
}

// skippedLine is a line not passed on, and why.
type skippedLine struct {
	raw    []byte
	reason string
	err    error
}

// skip counts and reports a line that is not passed on. A line of another
// AEP version is skipped and reported once per file (AEP-0003 §3.1).
func (t *tailer) skip(ctx context.Context, path string, f *tailedFile, s skippedLine) {
	if version, ok := versionOf(s.raw); ok && version != aep.Version {
		t.r.tel.eventsRefused(ctx, reasonVersion, 1)
		if !f.versionReported {
			f.versionReported = true
			t.r.set.Logger.Warn("skipping the lines of an unsupported AEP version in a JSONL session log",
				zap.String("path", path), zap.String("version", truncate(version)))
		}
		return
	}
	t.r.tel.eventsRefused(ctx, s.reason, 1)
	t.r.rl.Warn("jsonl:refused:"+s.reason, "skipping a line of a JSONL session log",
		zap.String("path", path), zap.String("reason", s.reason), zap.Error(s.err))
}

// versionOf reads the aep attribute of a line that is a JSON object.
func versionOf(line []byte) (string, bool) {
	v, err := aep.DecodeValue(line)
	if err != nil {
		return "", false
	}
	obj, _ := v.(map[string]any)
	version, ok := obj["aep"].(string)
	return version, ok
}

// jsonlLine is one complete line, newline cut; tooLong marks a line over
// the size limit, consumed but not kept.
type jsonlLine struct {
	raw     []byte
	tooLong bool
}

// readLines reads up to max complete lines and the bytes they took; an
// unterminated last line is left unread.
func readLines(br *bufio.Reader, max int, maxLine int64) ([]jsonlLine, int64, error) {
	var lines []jsonlLine
	var read int64
	for len(lines) < max {
		line, n, err := readLine(br, maxLine)
		if errors.Is(err, io.EOF) {
			return lines, read, nil
		}
		if err != nil {
			return nil, 0, err
		}
		lines = append(lines, line)
		read += n
	}
	return lines, read, nil
}

// readLine reads one newline-terminated line and the bytes it took;
// io.EOF when the rest holds no newline.
func readLine(br *bufio.Reader, maxLine int64) (jsonlLine, int64, error) {
	var line jsonlLine
	var n int64
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		if n > maxLine+1 {
			line = jsonlLine{tooLong: true}
		} else {
			line.raw = append(line.raw, chunk...)
		}
		switch {
		case err == nil:
			line.raw = bytes.TrimSuffix(line.raw, []byte("\n"))
			return line, n, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return jsonlLine{}, 0, err
		}
	}
}

func (t *tailer) offsetKey(path string) string {
	rel, err := filepath.Rel(t.cfg.Directory, path)
	if err != nil {
		rel = path
	}
	return "jsonl/" + filepath.ToSlash(rel)
}

// loadOffset is the stored offset of path, 0 when none is stored.
func (t *tailer) loadOffset(ctx context.Context, path string) int64 {
	if t.client == nil {
		return 0
	}
	raw, err := t.client.Get(ctx, t.offsetKey(path))
	if err != nil {
		t.r.rl.Error("jsonl:storage", "cannot read a JSONL offset from storage; reading the file from its start",
			zap.String("path", path), zap.Error(err))
		return 0
	}
	if raw == nil {
		return 0
	}
	offset, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || offset < 0 {
		t.r.rl.Error("jsonl:storage", "a stored JSONL offset is not a number; reading the file from its start",
			zap.String("path", path))
		return 0
	}
	return offset
}

func (t *tailer) storeOffset(ctx context.Context, path string, offset int64) {
	if t.client == nil {
		return
	}
	if err := t.client.Set(ctx, t.offsetKey(path), strconv.AppendInt(nil, offset, 10)); err != nil {
		t.r.rl.Error("jsonl:storage", "cannot store a JSONL offset; a restart reads those lines again",
			zap.String("path", path), zap.Error(err))
	}
}
