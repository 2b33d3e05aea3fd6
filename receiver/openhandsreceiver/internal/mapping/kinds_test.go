package mapping

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestContentText(t *testing.T) {
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	image := map[string]any{"type": "image", "image_urls": []any{"u"}}
	for _, c := range []struct {
		name    string
		content any
		want    string
	}{
		{"string", "plain", "plain"},
		{"one item", []any{text("total 0")}, "total 0"},
		{"items joined in order", []any{text("a"), image, text("b"), "not an item", text("c")}, "abc"},
		{"no text item", []any{image}, ""},
		{"empty", []any{}, ""},
		{"absent", nil, ""},
		{"another type", 1.5, ""},
	} {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, contentText(c.content)) })
	}
}

// TestVendorPayloadOnlyWhereItRides pins the vendor plane's payload at
// each level: none at metadata, and at full a copy the event's own fields
// do not share.
func TestVendorPayloadOnlyWhereItRides(t *testing.T) {
	f := loadFixture(t)
	mapMessage := func(level aep.Capture) (Event, *aep.Event) {
		ev, err := DecodeEvent(f.Events["message_user"].Input)
		require.NoError(t, err)
		out := newConversation(t, testConfig(level, false)).Map(ev, received)
		require.Len(t, out, 1)
		return ev, out[0]
	}
	_, metadata := mapMessage(aep.CaptureMetadata)
	assert.NotContains(t, metadata.Data, "payload")

	ev, full := mapMessage(aep.CaptureFull)
	payload := full.Data["payload"].(map[string]any)
	msg := payload["llm_message"].(map[string]any)
	assert.Equal(t, ev.Fields["llm_message"].(map[string]any)["role"], msg["role"])
	msg["role"] = "changed"
	payload["source"] = "changed"
	assert.NotEqual(t, "changed", ev.Fields["llm_message"].(map[string]any)["role"])
	assert.NotEqual(t, "changed", ev.Fields["source"])
}
