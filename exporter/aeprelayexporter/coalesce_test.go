package aeprelayexporter

import (
	"bytes"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeCounter is a net.Conn that records each Write it is given.
type writeCounter struct {
	net.Conn
	writes [][]byte
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

func TestCoalescingConnHoldsABatch(t *testing.T) {
	under := &writeCounter{}
	c := &coalescingConn{Conn: under}

	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	assert.Len(t, under.writes, 1, "not holding: written through")

	c.hold()
	for _, frame := range []string{"a", "b", "ping"} {
		n, err := c.Write([]byte(frame))
		require.NoError(t, err)
		assert.Equal(t, len(frame), n)
	}
	assert.Len(t, under.writes, 1, "held until release")
	require.NoError(t, c.release())
	require.Len(t, under.writes, 2)
	assert.Equal(t, "abping", string(under.writes[1]))

	c.hold()
	big := bytes.Repeat([]byte("x"), coalesceFlushBytes)
	_, err = c.Write(big)
	require.NoError(t, err)
	assert.Len(t, under.writes, 3, "a held batch past coalesceFlushBytes is written at once")
	require.NoError(t, c.release())
	assert.Len(t, under.writes, 3, "nothing left to write")
}
