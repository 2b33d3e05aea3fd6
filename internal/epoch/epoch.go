// Package epoch hands out AEP epochs (AEP-0001 §7 rule 2): the generation
// of a session's seq counter. A counter that restarts (no storage, a
// forgotten session) needs a fresh epoch that never repeats. The openhands
// receiver and the aepinbound processor take theirs from the one clock of
// the process.
package epoch // import "github.com/otelcol-openhands/otelcol-openhands/internal/epoch"

import (
	"sync"
	"time"
)

// Base is 2025-01-01T00:00:00Z. Epochs count seconds from it, so they stay
// below 2^31 until 2093 and well inside the 2^53 position packing some
// AEP consumers use (epoch·2^40 + seq).
var Base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock hands out epochs: the current second since Base, bumped past the
// last epoch it handed out, so that a component rebuilt within the same
// second (a config reload) still moves forward. A collector starts in
// longer than a second, so two processes never share an epoch.
type Clock struct {
	mu   sync.Mutex
	last int64
	now  func() time.Time
}

// NewClock returns a clock reading now.
func NewClock(now func() time.Time) *Clock { return &Clock{now: now} }

// Process is the process's clock. Components share it: theirs would
// restart with them and hand out a predecessor's epoch again.
var Process = NewClock(time.Now)

// Next returns an epoch later than any this clock handed out before.
func (c *Clock) Next() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = max(int64(c.now().Sub(Base)/time.Second), c.last+1)
	return c.last
}
