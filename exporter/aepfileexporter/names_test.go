package aepfileexporter

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEscapeName(t *testing.T) {
	tests := []struct {
		name, id, want string
	}{
		{name: "plain", id: "s_8f2c-01", want: "s_8f2c-01"},
		{name: "dot", id: ".", want: "%2e"},
		{name: "dot_dot", id: "..", want: "%2e%2e"},
		{name: "slash", id: "a/b", want: "a%2fb"},
		{name: "backslash", id: `a\b`, want: "a%5cb"},
		{name: "nul", id: "a\x00", want: "a%00"},
		{name: "upper_case", id: "Ab", want: "%41b"},
		{name: "percent", id: "%41b", want: "%2541b"},
		{name: "rotation_suffix", id: "s.1", want: "s%2e1"},
		{name: "non_ascii", id: "é", want: "%c3%a9"},
		{name: "windows_device", id: "con", want: "%63on"},
		{name: "windows_port", id: "lpt1", want: "%6cpt1"},
		{name: "tilde", id: "a~b", want: "a%7eb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, escapeName(tt.id))
		})
	}
}

// TestEscapeNameIsInjective: distinct ids, hostile ones included, get
// distinct stems, also once case is folded (a case-insensitive
// filesystem), and every stem is short and of the safe alphabet.
func TestEscapeNameIsInjective(t *testing.T) {
	long := strings.Repeat("a", 300)
	ids := []string{
		"a", "A", "b", "B", "ab", "aB", "Ab", "AB", "%61", "%41", ".", "..", "...", "/", "a/b", "a%2fb",
		"\x00", "a\x00", "con", "CON", "%63on", "com1", "nul", "s", "s.1", "s.jsonl", "~", "é", "e\u0301",
		long, long + "a", long + "b", long + "B", strings.Repeat("%", 300), strings.Repeat("%", 301),
		strings.Repeat("A", 100), strings.Repeat("a", 98) + "A", strings.Repeat("é", 200), strings.Repeat("é", 201),
		// Long enough to be cut, offset so that the cut falls inside an escape.
		"a" + strings.Repeat("%", 300), "aa" + strings.Repeat("%", 300),
	}
	seen := make(map[string]string)
	for _, id := range ids {
		stem := escapeName(id)
		require.LessOrEqual(t, len(stem), maxStem, "%q", id)
		require.NotEmpty(t, stem)
		for _, c := range []byte(stem) {
			require.True(t, isPlainByte(c) || c == '%' || c == hashMark, "%q has %q", stem, c)
		}
		// What precedes the hash is whole escapes: it decodes to the id,
		// or to its start when the id was too long.
		prefix, _, hashed := strings.Cut(stem, string(hashMark))
		decoded, err := url.PathUnescape(prefix)
		require.NoError(t, err, "%q", stem)
		if hashed {
			require.True(t, strings.HasPrefix(id, decoded), "%q", stem)
		} else {
			require.Equal(t, id, decoded)
		}
		folded := strings.ToLower(stem)
		if other, ok := seen[folded]; ok {
			t.Fatalf("%q and %q share the stem %q", other, id, stem)
		}
		seen[folded] = id
	}
}

func TestSegmentName(t *testing.T) {
	assert.Equal(t, "s1.jsonl", segmentName("s1", 0))
	assert.Equal(t, "s1.1.jsonl", segmentName("s1", 1))
	assert.Equal(t, "s1.12.jsonl", segmentName("s1", 12))
}
