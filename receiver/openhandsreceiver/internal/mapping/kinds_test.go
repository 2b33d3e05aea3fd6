package mapping

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
