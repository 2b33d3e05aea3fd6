package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/regularfile"
)

// compressSegments gzips every plain segment of a closed log in root, in
// place: {stem}.{n}.jsonl becomes {stem}.{n}.jsonl.gz, and returns how
// many it compressed. A log written again later continues in the segment
// after the last one. It reads only the immutable cfg and the root it is
// given, so it runs without mu.
func (w *logWriter) compressSegments(root *os.Root, dir, stem string) (int, error) {
	compressed := 0
	var errs []error
	for n := 0; ; n++ {
		path := filepath.Join(dir, segmentName(stem, n))
		_, plainErr := root.Lstat(path)
		_, gzErr := root.Lstat(path + ".gz")
		if plainErr != nil && gzErr != nil {
			return compressed, errors.Join(errs...)
		}
		if plainErr == nil {
			err := w.compress(root, path)
			if err == nil {
				compressed++
			}
			errs = append(errs, err)
		}
	}
}

// compress writes path's gzip beside it under a temporary name, makes it
// durable when syncing, renames it into place and removes path: a crash
// leaves the plain file, or both, never a partial .gz under its name.
func (w *logWriter) compress(root *os.Root, path string) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("compress %s: %w", w.abs(path), err)
		}
	}()
	src, err := regularfile.Open(root, path, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer src.Close()
	// Created afresh (O_EXCL): whatever a crash or someone else left
	// under the name, a symlink included, is removed, never followed.
	tmp := path + ".gz.tmp"
	if err := root.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dst, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, w.cfg.fileMode)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = dst.Close()
			_ = root.Remove(tmp)
		}
	}()
	if err := dst.Chmod(w.cfg.fileMode); err != nil {
		return err
	}
	zw := gzip.NewWriter(dst)
	if _, err := io.Copy(zw, src); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if w.cfg.sync {
		if err := dst.Sync(); err != nil {
			return err
		}
	}
	if err := dst.Close(); err != nil {
		return err
	}
	if err := root.Rename(tmp, path+".gz"); err != nil {
		return err
	}
	if err := root.Remove(path); err != nil {
		return err
	}
	if w.cfg.sync {
		return syncDir(root.OpenFile(filepath.Dir(path), os.O_RDONLY|syscall.O_DIRECTORY, 0))
	}
	return nil
}

// removeUntouched deletes the logs none of whose files was modified
// within maxAge: all of a log's segments together, so that a log never
// has a gap where its order would be lost. An open log is never touched.
// It returns the number of files removed.
func (w *logWriter) removeUntouched(now time.Time, maxAge time.Duration) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Logs open or being compressed are still being written.
	open := make(map[string]struct{}, len(w.logs)+len(w.compressing))
	for _, l := range w.logs {
		open[filepath.Join(l.dir, l.stem)] = struct{}{}
	}
	for stem := range w.compressing {
		open[stem] = struct{}{}
	}
	if w.root == nil {
		return 0, nil // not made yet
	}
	dirs := []string{"."}
	entries, err := regularfile.ReadDir(w.root, ".")
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", w.cfg.directory, err)
	}
	for _, e := range entries {
		if e.IsDir() { // a symlink is not
			dirs = append(dirs, e.Name())
		}
	}
	removed := 0
	var errs []error
	for _, dir := range dirs {
		n, err := w.removeUntouchedIn(dir, open, now.Add(-maxAge))
		removed += n
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// removeUntouchedIn removes, in dir, the logs not in open whose files were
// all last modified before cutoff.
func (w *logWriter) removeUntouchedIn(dir string, open map[string]struct{}, cutoff time.Time) (int, error) {
	entries, err := regularfile.ReadDir(w.root, dir)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", w.abs(dir), err)
	}
	type group struct {
		paths   []string
		touched bool
	}
	groups := make(map[string]*group)
	for _, e := range entries {
		stem, ok := stemOf(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		g := groups[stem]
		if g == nil {
			g = &group{}
			groups[stem] = g
		}
		g.paths = append(g.paths, filepath.Join(dir, e.Name()))
		g.touched = g.touched || !info.ModTime().Before(cutoff)
	}
	removed := 0
	var errs []error
	for stem, g := range groups {
		if _, ok := open[filepath.Join(dir, stem)]; ok || g.touched {
			continue
		}
		for _, path := range g.paths {
			if err := w.root.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// stemOf is the stem of a file this exporter writes ({stem}.jsonl,
// {stem}.{n}.jsonl, either with .gz, or a .gz.tmp a crash left); false for
// any other file.
func stemOf(name string) (string, bool) {
	stem, rest, ok := strings.Cut(name, ".")
	if !ok || stem == "" {
		return "", false
	}
	rest = strings.TrimSuffix(strings.TrimSuffix(rest, ".tmp"), ".gz")
	rest = strings.TrimSuffix(rest, "jsonl")
	if rest == "" {
		return stem, true
	}
	n, ok := strings.CutSuffix(rest, ".")
	if !ok || n == "" || strings.Trim(n, "0123456789") != "" {
		return "", false
	}
	return stem, true
}
