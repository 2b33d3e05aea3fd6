package ratelog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestOncePerCausePerInterval(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := New(zap.New(core), time.Minute)
	now := time.Unix(0, 0)
	l.now = func() time.Time { return now }

	for range 5 {
		l.Error("bad-json", "frame is not JSON")
	}
	l.Warn("loop", "paging loops")
	assert.Equal(t, 2, logs.Len(), "one line per cause")

	now = now.Add(time.Minute)
	l.Error("bad-json", "frame is not JSON")
	entries := logs.All()
	assert.Len(t, entries, 3)
	assert.Equal(t, int64(4), entries[2].ContextMap()["suppressed_since_last"])
}
