// Package regularfile opens the regular files of a watched or written
// directory and nothing else: a file someone else can write to may have
// been replaced by a symlink, a FIFO or a device, and following one would
// read or write outside the directory, or block on an open or a read.
package regularfile // import "github.com/otelcol-openhands/otelcol-openhands/internal/regularfile"

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// errNotRegular is wrapped by every refusal of Open.
var errNotRegular = errors.New("not a regular file")

// Open opens name inside root (which confines it to the directory, in
// whatever way name's folders are swapped) with flag, and only if what it
// opened is a regular file and name's entry is not a symlink (a link to
// another file inside the directory is refused too). O_NONBLOCK keeps a
// FIFO from blocking the open; it is then refused.
func Open(root *os.Root, name string, flag int) (*os.File, error) {
	f, err := root.OpenFile(name, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := check(root, name, f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// check reports why f, opened as name, is not a regular file named
// without a symlink: the entry must still be the file opened, so that a
// symlink opened through and then swapped for a plain file is refused.
func check(root *os.Root, name string, f *os.File) error {
	opened, err := f.Stat()
	if err != nil {
		return err
	}
	entry, err := root.Lstat(name)
	if err != nil {
		return err
	}
	switch {
	case entry.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s: %w (a symlink, not followed)", name, errNotRegular)
	case !opened.Mode().IsRegular():
		return fmt.Errorf("%s: %w (%s)", name, errNotRegular, opened.Mode().Type())
	case !os.SameFile(opened, entry):
		return fmt.Errorf("%s: %w (replaced while it was opened)", name, errNotRegular)
	}
	return nil
}

// ReadDir lists dir inside root; its entries' types are as listed, so a
// symlink is reported as one, never followed. dir must be a folder: one
// swapped for a FIFO since it was listed is refused, not opened (which
// would block until a writer came).
func ReadDir(root *os.Root, dir string) ([]fs.DirEntry, error) {
	d, err := root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}
