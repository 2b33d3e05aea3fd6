package aep

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSessionSource(t *testing.T) {
	assert.Equal(t, "aep://127.0.0.1:8000/agent/openhands/session/3f2c", SessionSource("127.0.0.1:8000", "openhands", "3f2c"))
	assert.Equal(t, "aep://h:1/agent/a%20b/session/c%2Fd", SessionSource("h:1", "a b", "c/d"))
}
