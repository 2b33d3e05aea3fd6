package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"strconv"
	"sync"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// epochBase is 2025-01-01T00:00:00Z. Epochs count seconds from it, so they
// stay below 2^31 until 2093 and well inside the 2^53 position packing
// some AEP consumers use (epoch·2^40 + seq).
var epochBase = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// epochClock hands out the (epoch) generation of every session's seq
// counter. Without durable storage the counter restarts with the receiver,
// so AEP-0001 §7 rule 2 requires a fresh epoch that never repeats: the start
// second, bumped past the last epoch this process handed out so that a
// receiver restarted within the same second (a config reload) still moves
// forward. With storage, a conversation keeps the epoch it was first seen
// in for as long as its state lasts.
type epochClock struct {
	mu   sync.Mutex
	last int64
	now  func() time.Time
}

var processEpochs = &epochClock{now: time.Now}

func (c *epochClock) next() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := int64(c.now().Sub(epochBase) / time.Second)
	if e <= c.last {
		e = c.last + 1
	}
	c.last = e
	return e
}

// sessionSource is the source of one generation of a conversation's
// session: the RECOMMENDED aep://{host:port}/agent/{agent}/session/{id}
// qualified by the generation's epoch. AEP keeps run terminals and
// session.ended exclusive per (source, session) across epochs, and dedupes
// on (source, id); a generation that cannot resume its predecessor's state
// (no storage, unreadable state, a conversation resharded here) replays
// the conversation's history, so it must be a new session of a new
// emitter, never a second account in the old one. The epoch in the source
// makes it so, and makes every id it derives differ from the old ones.
func sessionSource(hostPort, agent, conversationID string, epoch int64) string {
	return aep.SessionSource(hostPort, agent, conversationID) + "?epoch=" + strconv.FormatInt(epoch, 10)
}
