package openhandsreceiver

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// stamp is the vendor timestamp d after historyStart.
func stamp(d time.Duration) string {
	return historyStart.Add(d).Format("2006-01-02T15:04:05.000000")
}

func TestOverlapIDsKeepTheResumeMargin(t *testing.T) {
	o := newOverlapIDs()
	assert.True(t, o.add("a", stamp(0)))
	assert.False(t, o.add("a", stamp(0)), "a repeat inside the margin")
	assert.True(t, o.add("b", stamp(resumeMargin)))
	assert.False(t, o.add("a", stamp(0)), "exactly resumeMargin old: a reconnect pages it again")
	assert.True(t, o.add("c", stamp(resumeMargin+time.Millisecond)))
	assert.True(t, o.add("a", stamp(0)), "older than the margin: no reconnect pages it again")
	assert.True(t, o.add("a", stamp(0)), "nor is it kept")
	assert.Equal(t, 2, o.len(), "b and c")
	assert.True(t, o.add("undated", ""), "an unreadable timestamp counts as the newest")
	assert.False(t, o.add("undated", "garbage"))
}

func TestOverlapIDsHoldWhileTheHistoryPages(t *testing.T) {
	o := newOverlapIDs()
	// The connection subscribed at 60 s; the history pages from 0 to 90 s
	// (events appended while it paged), then the buffered frames repeat
	// everything from 55 s on.
	o.hold(stamp(60 * time.Second))
	for s := range 91 {
		o.add(fmt.Sprint(s), stamp(time.Duration(s)*time.Second))
	}
	o.historyDone()
	assert.Equal(t, 36, o.len(), "55 s to 90 s: resumeMargin before the subscription on")
	for s := 55; s <= 90; s++ {
		assert.False(t, o.add(fmt.Sprint(s), stamp(time.Duration(s)*time.Second)), "buffered frame %d repeats the history", s)
	}
	// A live event past the history's newest plus the margin ends the hold.
	assert.True(t, o.add("live", stamp(96*time.Second)))
	assert.Equal(t, 1, o.len(), "nothing else within the margin of 96 s")

	// No first frame: the hold keeps everything until it ends.
	o = newOverlapIDs()
	o.hold("")
	for s := range 100 {
		o.add(fmt.Sprint(s), stamp(time.Duration(s)*time.Second))
	}
	assert.Equal(t, 100, o.len())
	o.historyDone()
	o.add("live", stamp(200*time.Second))
	assert.Equal(t, 1, o.len())
}

func TestOverlapIDsCapAndRetire(t *testing.T) {
	o := newOverlapIDs()
	for i := range maxOverlapIDs + 10 {
		o.add(fmt.Sprint(i), stamp(0)) // a burst inside one margin
	}
	assert.Equal(t, maxOverlapIDs, o.len())
	assert.True(t, o.add("0", stamp(0)), "the oldest went first")

	o = newOverlapIDs()
	o.add("published-before-persisted", stamp(0))
	assert.True(t, o.retire("published-before-persisted"), "its durable frame retires it")
	assert.False(t, o.retire("published-before-persisted"))
	assert.Zero(t, o.len())
}
