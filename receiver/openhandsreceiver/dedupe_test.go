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
}
