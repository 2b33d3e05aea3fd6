package openhandsreceiver

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRecentIDsWindow(t *testing.T) {
	r := newRecentIDs(3)
	assert.True(t, r.add("a"))
	assert.False(t, r.add("a"))
	for i := range 3 {
		assert.True(t, r.add(fmt.Sprint(i)))
	}
	assert.True(t, r.add("a"), "a fell out of the window")
	assert.Len(t, r.set, 3)
	// Wrapped around the ring: the window is the last three ids, oldest out first.
	for _, id := range []string{"b", "c", "d", "e"} {
		assert.True(t, r.add(id))
	}
	assert.False(t, r.has("b"))
	for _, id := range []string{"c", "d", "e"} {
		assert.True(t, r.has(id), id)
	}
	assert.Len(t, r.set, 3)
}
