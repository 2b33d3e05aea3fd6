package regularfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpen(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "log.jsonl"), []byte("x\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "target"), []byte("secret\n"), 0o600))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	require.NoError(t, os.Symlink("log.jsonl", filepath.Join(dir, "inside-link")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "target"), filepath.Join(dir, "outside-link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "linked-folder")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "folder"), 0o700))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()

	f, err := Open(root, "log.jsonl", os.O_RDWR|os.O_APPEND)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	for _, tt := range []struct{ name, wantErr string }{
		{"fifo", "not a regular file (p---------)"},
		{"inside-link", "not a regular file (a symlink, not followed)"},
		// os.Root refuses what leaves the directory before Open looks.
		{"zero", "path escapes"},
		{"outside-link", "path escapes"},
		{"linked-folder/target", "path escapes"},
		{"folder", "is a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Open(root, tt.name, os.O_RDWR|os.O_APPEND)
			if f != nil {
				f.Close()
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// A folder swapped for a FIFO between a listing and ReadDir is refused at
// once: opening a FIFO to read blocks until a writer comes, and would stall
// the tailer's round and shutdown.
func TestReadDirFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "agent")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()

	done := make(chan error, 1)
	go func() {
		_, err := ReadDir(root, "agent")
		done <- err
	}()
	select {
	case err := <-done:
		assert.Error(t, err)
	case <-time.After(30 * time.Second):
		// Release the blocked open before failing.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("ReadDir blocked on a FIFO")
	}
}

// An entry swapped after the open is refused: what was opened is no longer
// what the name shows (a symlink, opened through, then replaced by a plain
// file before the check looked).
func TestCheckSwapped(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.jsonl"), []byte("other\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "log.jsonl"), []byte("x\n"), 0o600))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	f, err := root.Open("other.jsonl")
	require.NoError(t, err)
	defer f.Close()

	assert.ErrorContains(t, check(root, "log.jsonl", f), "replaced")
	assert.NoError(t, check(root, "other.jsonl", f))
}
