package aep

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDeterministicIDOfIsTheJoinedKey: DeterministicIDOf of a key is
// DeterministicID of its parts, at any length, before the epoch too.
func TestDeterministicIDOfIsTheJoinedKey(t *testing.T) {
	ts := time.Date(2026, 7, 12, 10, 15, 0, 123456000, time.UTC)
	long := strings.Repeat("x", 300)
	for _, at := range []time.Time{ts, time.Unix(-5, 0)} {
		assert.Equal(t, DeterministicID(at, "src", "event ev_1", "tool.requested", "0"),
			DeterministicIDOf(at, []byte("src\nevent ev_1\ntool.requested\n0")))
		assert.Equal(t, DeterministicID(at, "src", long), DeterministicIDOf(at, []byte("src\n"+long)))
		assert.Equal(t, DeterministicID(at), DeterministicIDOf(at, nil))
	}
}
