package epoch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestEpochsNeverRepeat(t *testing.T) {
	clock := NewClock(func() time.Time { return Base.Add(100 * time.Second) })
	a, b := clock.Next(), clock.Next()
	assert.Equal(t, int64(100), a)
	assert.Equal(t, int64(101), b, "a restart within the same second still moves forward")
	assert.Less(t, Process.Next(), int64(1)<<31)
}
