package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

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

	for _, name := range []string{"fifo", "zero", "inside-link", "outside-link", "linked-folder/target", "folder"} {
		t.Run(name, func(t *testing.T) {
			f, err := Open(root, name, os.O_RDWR|os.O_APPEND)
			if f != nil {
				f.Close()
			}
			require.Error(t, err)
			// Out of root or not regular: refused either way.
			assert.True(t, errors.Is(err, ErrNotRegular) || errors.Is(err, syscall.EISDIR) || isEscape(err), "%v", err)
		})
	}
}

// isEscape is os.Root's refusal of a path that leaves it.
func isEscape(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent"
}
