package mapping

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestNewEventIsShapedLikeTheSession(t *testing.T) {
	c, err := NewConversation(Config{
		ConversationID: "conv-1", ServerHost: "h:1",
		Ceiling: CapturePolicy{Categories: map[string]aep.Capture{"control": aep.CaptureNone}},
	}, nil)
	require.NoError(t, err)
	at := time.Date(2026, 7, 12, 8, 0, 0, 0, time.UTC)

	ack := c.NewEvent("control.accepted", at, "ack cmd-1")
	assert.Equal(t, c.Source(), ack.Source)
	assert.Equal(t, "conv-1", ack.Session)
	assert.Equal(t, aep.CaptureNone, ack.Capture)
	assert.Nil(t, ack.Data, "capture none carries no data")
	assert.Equal(t, ack.ID, c.NewEvent("control.accepted", at, "ack cmd-1").ID, "one key, one id")
	assert.NotEqual(t, ack.ID, c.NewEvent("control.accepted", at, "ack cmd-2").ID)

	sent := c.NewEvent("x.openhands.input.sent", at, "input cmd-1")
	assert.Equal(t, aep.CaptureMetadata, sent.Capture)
	assert.Equal(t, map[string]any{}, sent.Data, "no vendor stamps: the fact is the bridge's")
	assert.Equal(t, aep.SeverityDebug, sent.Severity)
	_, ok := c.Redacted(sent, "text")
	assert.False(t, ok, "a redacted field does not ride at metadata")
}
