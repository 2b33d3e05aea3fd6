package aepreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/regularfile"
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
	// offset is in the log's lines, decompressed for a .gz.
	offset int64
	// readGzip is the compressed file read to its end, unchanged since
	// when it is again: a .gz is written once, so it is not read again.
	readGzip os.FileInfo
	// versionReported: a line of an unsupported version was reported
	// (AEP-0003 §3.1: skip it, report it once).
	versionReported bool
	// inLongLine: offset is inside a line already counted too long; the
	// rest of it is passed over.
	inLongLine bool
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
	root, err := os.OpenRoot(t.cfg.Directory)
	if errors.Is(err, fs.ErrNotExist) {
		return // not made yet
	}
	if err != nil {
		t.r.rl.Error("jsonl:list", "cannot open the JSONL directory", zap.String("directory", t.cfg.Directory), zap.Error(err))
		return
	}
	defer root.Close()
	names, err := t.list(root)
	if err != nil {
		t.r.rl.Error("jsonl:list", "cannot list the JSONL directory", zap.String("directory", t.cfg.Directory), zap.Error(err))
		return
	}
	for log := range t.files {
		_, plain := slices.BinarySearch(names, log)
		_, gz := slices.BinarySearch(names, log+gzSuffix)
		if !plain && !gz {
			delete(t.files, log) // removed; its stored offset stays, in case it comes back
		}
	}
	for _, name := range slices.SortedFunc(slices.Values(names), bySegment) {
		if ctx.Err() != nil {
			return
		}
		t.tail(ctx, root, name)
	}
}

// bySegment orders logs by path with each log's segments in segment order
// ({stem}.jsonl, {stem}.1.jsonl, … {stem}.10.jsonl), as the aepfile
// exporter wrote them: by name alone "s1.1.jsonl" comes before
// "s1.jsonl", and a session caught up on in one round would lose its seq
// order.
func bySegment(a, b string) int {
	aStem, aN := segmentOf(a)
	bStem, bN := segmentOf(b)
	return cmp.Or(strings.Compare(aStem, bStem), cmp.Compare(aN, bN), strings.Compare(a, b))
}

// segmentOf splits a log's name into its stem and segment number (0 for
// {stem}.jsonl).
func segmentOf(name string) (string, int) {
	stem := strings.TrimSuffix(strings.TrimSuffix(name, gzSuffix), ".jsonl")
	i := strings.LastIndexByte(stem, '.')
	if i < 0 || strings.ContainsRune(stem[i:], '/') {
		return stem, 0
	}
	n, err := strconv.Atoi(stem[i+1:])
	if err != nil || n <= 0 || stem[i+1] == '+' {
		return stem, 0
	}
	return stem[:i], n
}

// list names, sorted and relative to the directory, the session logs to
// read: {agent}/{session}.jsonl, and {agent}.jsonl, where the aepfile
// exporter writes an agent's events that have no session. Only regular
// files and real folders are listed: a symlink, a FIFO or a device is
// skipped (logged), so that nothing outside the directory is read and no
// open or read can block the round.
func (t *tailer) list(root *os.Root) ([]string, error) {
	top, err := regularfile.ReadDir(root, ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range top {
		if e.IsDir() {
			inner, err := regularfile.ReadDir(root, e.Name())
			if err != nil {
				t.r.rl.Warn("jsonl:list:"+e.Name(), "cannot list an agent's folder of JSONL session logs",
					zap.String("directory", t.cfg.Directory), zap.String("folder", e.Name()), zap.Error(err))
				continue
			}
			for _, f := range inner {
				if name := path.Join(e.Name(), f.Name()); t.isSessionLog(name, f) {
					names = append(names, name)
				}
			}
			continue
		}
		if t.isSessionLog(e.Name(), e) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	// A log being compressed has both forms for a moment: read the plain.
	return slices.DeleteFunc(names, func(name string) bool {
		plain, gz := strings.CutSuffix(name, gzSuffix)
		_, both := slices.BinarySearch(names, plain)
		return gz && both
	}), nil
}

// gzSuffix ends a log the aepfile exporter compressed once its session
// ended: the same lines as the plain log it replaced.
const gzSuffix = ".gz"

// isSessionLog reports whether e, at name, is a session log to read: a
// *.jsonl or *.jsonl.gz regular file. Anything else so named is reported.
func (t *tailer) isSessionLog(name string, e fs.DirEntry) bool {
	if !strings.HasSuffix(strings.TrimSuffix(name, gzSuffix), ".jsonl") {
		return false
	}
	if !e.Type().IsRegular() {
		t.r.rl.Warn("jsonl:not_regular", "skipping a JSONL session log that is not a regular file (a symlink, a FIFO, a device)",
			zap.String("directory", t.cfg.Directory), zap.String("path", name), zap.Stringer("type", e.Type()))
		return false
	}
	return true
}

// tail passes on the complete lines of one file past its offset, a batch
// at a time, until it has read what the file held when opened (a log
// written faster than it is read does not hold up the others) or the
// pipeline refuses for now. A log and its .gz are one log: the .gz goes
// on at the plain log's offset.
func (t *tailer) tail(ctx context.Context, root *os.Root, name string) {
	log := strings.TrimSuffix(name, gzSuffix)
	f, ok := t.files[log]
	if !ok {
		f = &tailedFile{offset: t.loadOffset(ctx, log)}
		t.files[log] = f
	}
	file, lines, err := t.openAt(root, name, f)
	if err != nil {
		t.r.rl.Warn("jsonl:open:"+name, "cannot open a JSONL session log", zap.String("path", name), zap.Error(err))
		return
	}
	if file == nil {
		return // a .gz read already
	}
	defer file.Close()
	lr := newLineReader(ctxReader{ctx, lines}, t.r.maxBody, strings.HasSuffix(name, gzSuffix))
	lr.inLong = f.inLongLine
	for ctx.Err() == nil {
		batch, read, err := lr.readBatch(maxLinesPerBatch, t.r.maxBody)
		if err != nil {
			t.r.rl.Warn("jsonl:read:"+name, "cannot read a JSONL session log", zap.String("path", name), zap.Error(err))
			return
		}
		if read == 0 {
			if strings.HasSuffix(name, gzSuffix) {
				f.readGzip, _ = file.Stat()
			}
			return
		}
		if !t.pass(ctx, name, f, batch) {
			return
		}
		f.offset += read
		f.inLongLine = lr.inLong
		// Stored even while shutting down: the lines have left.
		t.storeOffset(context.WithoutCancel(ctx), log, f.offset)
	}
}

// openAt opens name, a regular file inside root (never a symlink, a FIFO
// or a device put in its place since the listing), and returns it and its
// lines from f's offset: up to the size it has now, or decompressed for a
// .gz. f's offset is reset when the file shrank below it. The file is nil
// for a .gz read to its end already.
func (t *tailer) openAt(root *os.Root, name string, f *tailedFile) (*os.File, io.Reader, error) {
	file, err := regularfile.Open(root, name, os.O_RDONLY)
	if err != nil {
		return nil, nil, err
	}
	lines, err := t.seek(file, name, f)
	if err != nil || lines == nil {
		file.Close()
		return nil, nil, err
	}
	return file, lines, nil
}

// seek positions file's lines at f's offset; nil lines for a .gz read
// already.
func (t *tailer) seek(file *os.File, name string, f *tailedFile) (io.Reader, error) {
	info, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(name, gzSuffix) {
		if info.Size() < f.offset {
			t.shrank(name, f, info.Size())
		}
		if _, err := file.Seek(f.offset, io.SeekStart); err != nil {
			return nil, err
		}
		return io.LimitReader(file, min(info.Size()-f.offset, t.roundBytes())), nil
	}
	if f.readGzip != nil && os.SameFile(f.readGzip, info) && f.readGzip.Size() == info.Size() && f.readGzip.ModTime().Equal(info.ModTime()) {
		return nil, nil
	}
	zr, err := gzip.NewReader(file)
	if err != nil {
		return nil, err
	}
	skipped, err := io.CopyN(io.Discard, zr, f.offset)
	if errors.Is(err, io.EOF) {
		t.shrank(name, f, skipped)
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return zr, zr.Reset(file)
	}
	return zr, err
}

// shrank reads a log again from its start: truncated or rewritten, which
// an append-only log never is, so what it holds now is new.
func (t *tailer) shrank(name string, f *tailedFile, size int64) {
	t.r.set.Logger.Warn("a JSONL session log shrank below its offset; reading it again from the start",
		zap.String("path", name), zap.Int64("offset", f.offset), zap.Int64("size", size))
	f.offset, f.inLongLine = 0, false
}

// roundBytes bounds what one round reads of a plain log: a few lines of
// the longest size taken, so that a huge file (a sparse one holding no
// newline, the regular-file form of /dev/zero) does not hold up the logs
// after it; the rest is read in the next rounds.
func (t *tailer) roundBytes() int64 { return 8 * (t.r.maxBody + 1) }

// ctxReader fails its reads once ctx is done, so that shutdown does not
// wait for a long read (a .gz that expands a lot) to end.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
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
// the size limit, consumed but not kept, and open one that has no newline
// yet (the last line of a .gz, or a line too long, consumed as far as it
// goes).
type jsonlLine struct {
	raw     []byte
	tooLong bool
	open    bool
}

// lineReader reads complete lines; a line read past a batch's byte budget
// is held for the next batch.
type lineReader struct {
	br      *bufio.Reader
	maxLine int64
	// final: the reader ends where the log does (a .gz, written once),
	// so an unterminated last line is complete.
	final bool
	// inLong: the reader is inside a line already read as too long; the
	// rest of it, up to its newline, is consumed and not returned.
	inLong bool
	held   *jsonlLine
	heldN  int64
}

func newLineReader(r io.Reader, maxLine int64, final bool) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), maxLine: maxLine, final: final}
}

// readBatch reads up to max complete lines of at most maxBytes together
// (a longer line makes a batch of its own), and the bytes they took; an
// unterminated last line is left unread unless the reader is final.
func (lr *lineReader) readBatch(max int, maxBytes int64) ([]jsonlLine, int64, error) {
	var lines []jsonlLine
	var read, held int64
	for len(lines) < max {
		line, n, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		if lr.inLong {
			lr.inLong = line.open
			read += n
			continue
		}
		if len(lines) > 0 && held+int64(len(line.raw)) > maxBytes {
			lr.held, lr.heldN = &line, n
			break
		}
		lines = append(lines, line)
		read += n
		held += int64(len(line.raw))
		lr.inLong = line.tooLong && line.open
	}
	return lines, read, nil
}

// next is the held line, else the next one read.
func (lr *lineReader) next() (jsonlLine, int64, error) {
	if lr.held != nil {
		line, n := *lr.held, lr.heldN
		lr.held = nil
		return line, n, nil
	}
	return readLine(lr.br, lr.maxLine, lr.final)
}

// readLine reads one newline-terminated line and the bytes it took;
// io.EOF when the rest holds no newline, unless final (the rest is the
// last line) or the rest is already too long: then it is an open line.
func readLine(br *bufio.Reader, maxLine int64, final bool) (jsonlLine, int64, error) {
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
		case errors.Is(err, io.EOF) && n > 0 && (final || line.tooLong):
			line.open = true
			return line, n, nil
		default:
			return jsonlLine{}, 0, err
		}
	}
}

// offsetKey is the storage key of name, a path relative to the directory.
func (t *tailer) offsetKey(name string) string { return "jsonl/" + name }

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
