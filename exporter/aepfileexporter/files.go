package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"bytes"
	"compress/gzip"
	"container/list"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/recent"
	"github.com/otelcol-openhands/otelcol-openhands/internal/regularfile"
)

// fileKey names one session log: an agent-scoped event (no session) goes
// to the agent's own log.
type fileKey struct{ agent, session string }

func (k fileKey) String() string { return k.agent + "\x00" + k.session }

func keyOf(ev *aep.Event) fileKey { return fileKey{agent: ev.Agent, session: ev.Session} }

// sessionEnded is the type that ends a session: its log is closed once
// ended_grace has passed.
const sessionEnded = "session.ended"

// writerConfig is what the file writer needs of Config, parsed.
type writerConfig struct {
	directory         string
	fileMode, dirMode fs.FileMode
	maxOpen           int
	dedupWindow       int
	// sync makes a file's lines durable before it is closed (any policy
	// but none), and makes a created entry durable in its directory.
	sync bool
	// rotateBytes, when positive, starts a log's next segment before a
	// line would take the current one past it.
	rotateBytes int64
	// compressEnded gzips an ended session's segments once it is closed.
	compressEnded bool
}

// sessionLog is one open session log: the descriptor of its current
// segment and what it remembers of it.
type sessionLog struct {
	key fileKey
	// dir is the log's folder relative to the directory ("." for an
	// agent's own log), stem its escaped name.
	dir, stem string
	segment   int
	f         *os.File
	// size is the segment's length, which always ends a complete line.
	size int64
	// dirty: lines were written since the last sync.
	dirty bool
	seen  *dedup
	// endedAt is when the session's session.ended was written; zero
	// until then.
	endedAt time.Time
	elem    *list.Element
}

// path is l's current segment, relative to the directory.
func (l *sessionLog) path() string { return filepath.Join(l.dir, segmentName(l.stem, l.segment)) }

// closedPerOpen is how many closed logs' dedup state is kept per open
// file: sessions written in turn past max_open_files are each closed and
// reopened, and keeping a few times as many spares reading them again.
const closedPerOpen = 4

// closedLog is a closed log's dedup state and where its lines ended.
type closedLog struct {
	seen    *dedup
	segment int
	size    int64
	ended   bool
}

// logWriter appends events to session logs, holding at most maxOpen of
// them open. It is safe for concurrent use.
//
// Every file operation goes through root, the directory opened as an
// os.Root, so none reaches outside it whatever a folder or file inside was
// swapped for; an existing file is opened only if it is a regular file and
// not a symlink (regularfile), an existing agent folder only if it is a
// folder and not a symlink, narrowed to dir_mode if it is wider.
type logWriter struct {
	cfg    writerConfig
	logger *zap.Logger

	mu sync.Mutex
	// root is the directory, nil until it is made and opened.
	root *os.Root
	logs map[fileKey]*sessionLog
	// lru orders the open logs, most recently written first.
	lru *list.List
	// dirs are the folders (relative, "." the root) known to exist.
	dirs map[string]struct{}
	// unsyncedDirs gained an entry since the last sync (sync only).
	unsyncedDirs map[string]struct{}
	// compressing holds the logs (dir/stem, relative) whose segments are being
	// compressed, outside mu; compressedOne is signalled as each is done.
	compressing   map[string]struct{}
	compressedOne *sync.Cond
	// rotated and compressed count segments since the last takeCounts.
	rotated, compressed int
	// closedLogs keeps what the last logs closed held, so that one
	// closed for the open-file bound and written again is not read whole
	// again (zero for a log open since). closedPerOpen per open file.
	closedLogs recent.Window[*closedLog]
	// line is write's buffer for a line and its '\n', reused under mu.
	line []byte
}

func newLogWriter(cfg writerConfig, logger *zap.Logger) *logWriter {
	w := &logWriter{
		cfg: cfg, logger: logger,
		logs: make(map[fileKey]*sessionLog), lru: list.New(),
		dirs: make(map[string]struct{}), unsyncedDirs: make(map[string]struct{}),
		compressing: make(map[string]struct{}),
		closedLogs:  recent.New[*closedLog](closedPerOpen * cfg.maxOpen),
	}
	w.compressedOne = sync.NewCond(&w.mu)
	return w
}

// openLog returns key's log if it is open, marked most recently written.
func (w *logWriter) openLog(key fileKey) (*sessionLog, bool) {
	l, ok := w.logs[key]
	if ok {
		w.lru.MoveToFront(l.elem)
	}
	return l, ok
}

func (w *logWriter) isCompressing(dir, stem string) bool {
	_, ok := w.compressing[filepath.Join(dir, stem)]
	return ok
}

// write appends ev's line to its session log, in one write(2), unless the
// log already holds its (source, id): written is false for a redelivery.
// A failed write leaves the file as it was.
func (w *logWriter) write(ev *aep.Event, raw []byte, now time.Time) (written bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, err := w.open(keyOf(ev), now)
	if err != nil {
		return false, err
	}
	key := keyOfEvent(ev)
	if l.seen.has(key) {
		return false, nil
	}
	w.line = append(append(w.line[:0], raw...), '\n')
	line := w.line
	if w.cfg.rotateBytes > 0 && l.size > 0 && l.size+int64(len(line)) > w.cfg.rotateBytes {
		if err := w.rotate(l); err != nil {
			return false, err
		}
	}
	n, err := l.f.Write(line)
	if err != nil {
		// A short write would leave a torn line for the next one to
		// glue onto: cut the file back to its last complete line.
		if n > 0 {
			err = errors.Join(err, l.f.Truncate(l.size))
		}
		return false, fmt.Errorf("write %s: %w", w.abs(l.path()), err)
	}
	l.size += int64(n)
	l.dirty = true
	l.seen.add(key)
	if ev.Type == sessionEnded {
		l.endedAt = now
	}
	return true, nil
}

// open returns key's open log, opening it (and closing the least recently
// written one past the bound) if need be.
func (w *logWriter) open(key fileKey, now time.Time) (*sessionLog, error) {
	if l, ok := w.openLog(key); ok {
		return l, nil
	}
	l := &sessionLog{key: key, seen: newDedup(w.cfg.dedupWindow)}
	// An agent-scoped log sits beside its agent's folder, as
	// {directory}/{agent}.jsonl; a session's inside it.
	l.dir, l.stem = ".", escapeName(key.agent)
	if key.session != "" {
		l.dir, l.stem = l.stem, escapeName(key.session)
	}
	// A log being compressed is written again once it is done, after its
	// last compressed segment (a concurrent push may have opened it by
	// then).
	if w.isCompressing(l.dir, l.stem) {
		for w.isCompressing(l.dir, l.stem) {
			w.compressedOne.Wait()
		}
		if open, ok := w.openLog(key); ok {
			return open, nil
		}
	}
	if len(w.logs) >= w.cfg.maxOpen {
		if err := w.close(w.lru.Back().Value.(*sessionLog)); err != nil {
			return nil, err
		}
	}
	if err := w.mkdir(l.dir); err != nil {
		return nil, err
	}
	segment, err := lastSegment(w.root, l.dir, l.stem)
	if err != nil {
		return nil, err
	}
	l.segment = segment
	if err := w.openSegment(l); err != nil {
		return nil, err
	}
	ended, err := w.recoverSeen(l)
	if err != nil {
		l.f.Close()
		return nil, err
	}
	// Until it is closed again, the log's state is l's.
	if c := w.closedLogs.Get(key.String()); c != nil {
		*c = closedLog{}
	}
	if ended {
		l.endedAt = now // a late redelivery: close it again after the grace
	}
	w.logs[key] = l
	l.elem = w.lru.PushFront(l)
	return l, nil
}

// recoverSeen fills l's dedup and reports whether the session had ended:
// from what l held when this process closed it, if the log is as it left
// it, else from every line of its segments, in order (the current one up
// to its last complete line), a line at a time: what it keeps is bounded
// by dedup_window, not by the log.
func (w *logWriter) recoverSeen(l *sessionLog) (ended bool, err error) {
	if w.cfg.dedupWindow <= 0 {
		return false, nil
	}
	if c := w.closedLogs.Get(l.key.String()); c != nil && c.seen != nil && c.segment == l.segment && c.size == l.size {
		l.seen = c.seen
		return c.ended, nil
	}
	for n := range l.segment {
		path := filepath.Join(l.dir, segmentName(l.stem, n))
		segEnded, err := w.recoverSegment(l.seen, path)
		if err != nil {
			return false, fmt.Errorf("read %s: %w", w.abs(path), err)
		}
		ended = ended || segEnded
	}
	segEnded, err := l.seen.recover(io.NewSectionReader(l.f, 0, l.size))
	if err != nil {
		return false, fmt.Errorf("read %s: %w", w.abs(l.path()), err)
	}
	return ended || segEnded, nil
}

// recoverSegment adds the events of a closed segment, plain or gzipped,
// to seen; none if it is gone.
func (w *logWriter) recoverSegment(seen *dedup, path string) (ended bool, err error) {
	f, err := regularfile.Open(w.root, path, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = regularfile.Open(w.root, path+".gz", os.O_RDONLY)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return false, err
		}
		return seen.recover(zr)
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	return seen.recover(f)
}

// openSegment opens l's current segment for appending, creating it with
// the configured mode, and cuts a torn last line a crash left. An existing
// segment must be a regular file, not a symlink.
func (w *logWriter) openSegment(l *sessionLog) error {
	path := l.path()
	f, err := w.root.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, w.cfg.fileMode)
	created := err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = regularfile.Open(w.root, path, os.O_RDWR|os.O_APPEND)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			w.lost(l.dir) // removed behind our back: make it again next time
		}
		return fmt.Errorf("open %s: %w", w.abs(path), err)
	}
	size, err := w.prepare(f, path, created)
	if err != nil {
		f.Close()
		return err
	}
	if created && w.cfg.sync {
		w.unsyncedDirs[l.dir] = struct{}{}
	}
	l.f, l.size, l.dirty = f, size, false
	return nil
}

// prepare sets a created file's mode whatever the umask, or cuts an
// existing one's torn last line; it returns the file's size.
func (w *logWriter) prepare(f *os.File, path string, created bool) (int64, error) {
	if created {
		return 0, f.Chmod(w.cfg.fileMode)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end, err := lastLineEnd(f, st.Size())
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", w.abs(path), err)
	}
	if end < st.Size() {
		w.logger.Warn("cutting a torn last line a crash left in an AEP session log; its event is redelivered",
			zap.String("path", w.abs(path)), zap.Int64("bytes", st.Size()-end))
		if err := f.Truncate(end); err != nil {
			return 0, fmt.Errorf("truncate %s: %w", w.abs(path), err)
		}
	}
	return end, nil
}

// tailChunk is how much of a file is read at a time, from its end, to
// find its last complete line.
const tailChunk = 64 << 10

// lastLineEnd is the offset just past f's last '\n', 0 if it has none.
func lastLineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, min(size, tailChunk))
	for end := size; end > 0; {
		n := min(end, int64(len(buf)))
		if _, err := f.ReadAt(buf[:n], end-n); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// lastSegment is the segment to append to: the last one if it is still
// plain, the one after it if that one is compressed, 0 for a new log.
func lastSegment(root *os.Root, dir, stem string) (int, error) {
	next := 0
	for ; ; next++ {
		plain := filepath.Join(dir, segmentName(stem, next))
		_, err := root.Lstat(plain)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		if _, err := root.Lstat(plain + ".gz"); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			return 0, err
		}
	}
	if next > 0 {
		if _, err := root.Lstat(filepath.Join(dir, segmentName(stem, next-1))); err == nil {
			return next - 1, nil
		}
	}
	return next, nil
}

// makeRoot makes and opens the directory if need be.
func (w *logWriter) makeRoot() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mkdir(".")
}

// abs is where rel, relative to the directory, is: for messages.
func (w *logWriter) abs(rel string) string { return filepath.Join(w.cfg.directory, rel) }

// mkdir makes dir, a folder relative to the directory ("." the directory
// itself), if it is missing.
func (w *logWriter) mkdir(dir string) error {
	if _, ok := w.dirs[dir]; ok {
		return nil
	}
	if err := w.openRoot(); err != nil {
		return err
	}
	if dir != "." {
		if err := w.makeFolder(dir); err != nil {
			return err
		}
	}
	w.dirs[dir] = struct{}{}
	return nil
}

// openRoot makes the directory (with its parents, dir_mode) if it is
// missing, and opens it as the root of every file operation. An existing
// directory is the operator's and is left as it is, with a warning when
// other users may write to it (they could plant files, refused, or fill
// the disk).
func (w *logWriter) openRoot() error {
	if w.root != nil {
		return nil
	}
	dir := w.cfg.directory
	err := os.Mkdir(dir, w.cfg.dirMode)
	if errors.Is(err, fs.ErrNotExist) {
		err = os.MkdirAll(dir, w.cfg.dirMode)
	}
	created := err == nil
	switch {
	case created:
		if err := os.Chmod(dir, w.cfg.dirMode); err != nil {
			return fmt.Errorf("chmod %s: %w", dir, err)
		}
		if w.cfg.sync {
			if err := syncDir(os.Open(filepath.Dir(dir))); err != nil {
				return fmt.Errorf("fsync %s: %w", filepath.Dir(dir), err)
			}
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	if st, err := root.Stat("."); err == nil && !created && st.Mode().Perm()&0o022 != 0 {
		w.logger.Warn("the AEP session log directory is writable by other users; it is left as it is",
			zap.String("directory", dir), zap.Stringer("mode", st.Mode().Perm()))
	}
	w.root = root
	return nil
}

// makeFolder makes an agent's folder with dir_mode, whatever the umask. An
// existing one must be a folder, not a symlink, and is narrowed to
// dir_mode when its mode is wider: the folder is the exporter's, and a
// folder others may write to lets them plant a session log.
func (w *logWriter) makeFolder(dir string) error {
	err := w.root.Mkdir(dir, w.cfg.dirMode)
	switch {
	case err == nil:
		if err := w.root.Chmod(dir, w.cfg.dirMode); err != nil {
			return fmt.Errorf("chmod %s: %w", w.abs(dir), err)
		}
		if w.cfg.sync {
			w.unsyncedDirs["."] = struct{}{}
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		w.lost(dir)
		fallthrough
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("create directory %s: %w", w.abs(dir), err)
	}
	st, err := w.root.Lstat(dir)
	if err != nil {
		return fmt.Errorf("create directory %s: %w", w.abs(dir), err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory (%s); refusing to write through it", w.abs(dir), st.Mode().Type())
	}
	if wider := st.Mode().Perm() &^ w.cfg.dirMode; wider != 0 {
		if err := w.root.Chmod(dir, w.cfg.dirMode); err != nil {
			return fmt.Errorf("chmod %s: %w", w.abs(dir), err)
		}
		w.logger.Warn("narrowed an existing agent folder of AEP session logs to dir_mode",
			zap.String("path", w.abs(dir)), zap.Stringer("was", st.Mode().Perm()), zap.Stringer("now", w.cfg.dirMode))
	}
	return nil
}

// lost forgets that dir exists, and the root with it when the directory
// itself was removed: both are made again next time.
func (w *logWriter) lost(dir string) {
	delete(w.dirs, dir)
	st, err := os.Stat(w.cfg.directory)
	if opened, rootErr := w.root.Stat("."); err == nil && rootErr == nil && os.SameFile(st, opened) {
		return // still there
	}
	clear(w.dirs)
	w.root.Close()
	w.root = nil
}

// close syncs (when configured) and closes l; it leaves the table even if
// that fails, so the bound holds.
func (w *logWriter) close(l *sessionLog) error {
	var err error
	if w.cfg.sync && l.dirty {
		err = l.f.Sync()
	}
	err = errors.Join(err, l.f.Close())
	delete(w.logs, l.key)
	w.lru.Remove(l.elem)
	if err != nil {
		return fmt.Errorf("close %s: %w", w.abs(l.path()), err)
	}
	l.seen.forgetPositions()
	w.rememberClosed(l.key, closedLog{seen: l.seen, segment: l.segment, size: l.size, ended: !l.endedAt.IsZero()})
	return nil
}

// rememberClosed keeps what key's log held when it was closed.
func (w *logWriter) rememberClosed(key fileKey, c closedLog) {
	k := key.String()
	w.closedLogs.Put(k, new(closedLog)) // a known key keeps its holder
	*w.closedLogs.Get(k) = c
}

// rotate closes l's current segment and continues l in the next one; what
// l remembers of its lines goes on with it.
func (w *logWriter) rotate(l *sessionLog) error {
	previous := l.path()
	var err error
	if w.cfg.sync && l.dirty {
		err = l.f.Sync()
	}
	if err = errors.Join(err, l.f.Close()); err != nil {
		err = fmt.Errorf("close %s: %w", w.abs(previous), err)
	}
	l.segment++
	w.rotated++
	if openErr := w.openSegment(l); openErr != nil {
		// l holds no descriptor now: forget it; opening it again finds
		// its last segment.
		delete(w.logs, l.key)
		w.lru.Remove(l.elem)
		return errors.Join(err, openErr)
	}
	return err
}

// sync makes every line written so far, and every entry created, durable.
func (w *logWriter) sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, l := range w.logs {
		if !l.dirty {
			continue
		}
		if err := l.f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("fsync %s: %w", w.abs(l.path()), err))
			continue
		}
		l.dirty = false
	}
	for dir := range w.unsyncedDirs {
		if err := w.syncFolder(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(w.unsyncedDirs, dir)
	}
	return errors.Join(errs...)
}

// syncFolder makes the entries of dir, relative to the directory, durable.
func (w *logWriter) syncFolder(dir string) error {
	if w.root == nil {
		return fmt.Errorf("fsync %s: the directory is not open", w.abs(dir))
	}
	if err := syncDir(w.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)); err != nil {
		return fmt.Errorf("fsync %s: %w", w.abs(dir), err)
	}
	return nil
}

// syncDir syncs and closes d, the directory just opened (or err).
func syncDir(d *os.File, err error) error {
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// closeEnded closes the logs whose session ended at least grace ago, and
// compresses their segments when configured: without holding mu, so that
// other sessions are written meanwhile, while a write to a log being
// compressed waits for it.
func (w *logWriter) closeEnded(now time.Time, grace time.Duration) error {
	w.mu.Lock()
	var errs []error
	var compress []string
	root := w.root
	for _, l := range w.logs {
		if l.endedAt.IsZero() || now.Sub(l.endedAt) < grace {
			continue
		}
		if err := w.close(l); err != nil {
			errs = append(errs, err)
			continue
		}
		if w.cfg.compressEnded {
			stem := filepath.Join(l.dir, l.stem)
			w.compressing[stem] = struct{}{}
			compress = append(compress, stem)
		}
	}
	w.mu.Unlock()
	for _, stem := range compress {
		n, err := w.compressSegments(root, filepath.Dir(stem), filepath.Base(stem))
		errs = append(errs, err)
		w.mu.Lock()
		w.compressed += n
		delete(w.compressing, stem)
		w.mu.Unlock()
		w.compressedOne.Broadcast()
	}
	return errors.Join(errs...)
}

// closeAll closes every open log.
func (w *logWriter) closeAll() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, l := range w.logs {
		errs = append(errs, w.close(l))
	}
	if w.root != nil {
		errs = append(errs, w.root.Close())
		w.root = nil
		clear(w.dirs)
	}
	return errors.Join(errs...)
}

// takeCounts returns the segments rotated and compressed since it was
// last called.
func (w *logWriter) takeCounts() (rotated, compressed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rotated, compressed = w.rotated, w.compressed
	w.rotated, w.compressed = 0, 0
	return rotated, compressed
}

// openLogs is the number of open session logs.
func (w *logWriter) openLogs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.logs)
}
