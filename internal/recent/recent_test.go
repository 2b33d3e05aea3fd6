package recent

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWindowKeepsTheLastKeys(t *testing.T) {
	w := New[int](3)
	assert.True(t, w.Put("a", 1))
	assert.False(t, w.Put("a", 2), "a known key")
	assert.Equal(t, 1, w.Get("a"), "a known key keeps its value")
	for i := range 3 {
		assert.True(t, w.Put(fmt.Sprint(i), i))
	}
	assert.False(t, w.Has("a"), "the oldest fell out")
	assert.Zero(t, w.Get("a"))
	// Wrapped around the ring: the window is the last three keys, oldest out first.
	for _, k := range []string{"b", "c", "d", "e"} {
		assert.True(t, w.Put(k, 0))
	}
	assert.False(t, w.Has("b"))
	for _, k := range []string{"c", "d", "e"} {
		assert.True(t, w.Has(k), k)
	}
	assert.Equal(t, 3, w.Len())
}

func TestWindowOfNoCapacityRemembersNothing(t *testing.T) {
	w := New[struct{}](0)
	assert.True(t, w.Put("a", struct{}{}))
	assert.True(t, w.Put("a", struct{}{}))
	assert.False(t, w.Has("a"))
	assert.Zero(t, w.Len())
}
