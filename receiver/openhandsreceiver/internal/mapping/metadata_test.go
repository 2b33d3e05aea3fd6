package mapping

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestMetadata(t *testing.T) {
	const updated = "2026-12-02T03:00:00.123456Z"
	now := time.Now()
	for _, tc := range []struct {
		name  string
		level aep.Capture
		want  map[string]any
	}{
		{"metadata: the key only", aep.CaptureMetadata, map[string]any{"key": "title", "vendor_ts": updated}},
		{"redacted: the value as a patch", aep.CaptureRedacted, map[string]any{
			"key": "title", "vendor_ts": updated,
			"delta": []any{map[string]any{"op": "replace", "path": "/title", "value": "Fix it"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(tc.level, false))
			out := c.Metadata("title", "Fix it", updated, now)
			require.Len(t, out, 1)
			assert.Equal(t, "state.delta", out[0].Type)
			assert.Equal(t, tc.want, out[0].Data)
			assert.Equal(t, out[0].ID, c.Metadata("title", "Fix it", updated, now)[0].ID, "one snapshot seen twice: one id")
			assert.NotEqual(t, out[0].ID, c.Metadata("title", "Renamed", updated, now)[0].ID, "a rename that keeps updated_at: a new id")
		})
	}
	t.Run("ended", func(t *testing.T) {
		c := newConversation(t, testConfig(aep.CaptureMetadata, false))
		c.End(now, "")
		assert.Nil(t, c.Metadata("title", "late", updated, now))
	})
}
