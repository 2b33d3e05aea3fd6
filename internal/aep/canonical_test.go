package aep

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// referenceCanonicalString is RFC 8785's string rule written rune by rune.
func referenceCanonicalString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var canonicalStrings = []string{
	"", "plain", `q"uote`, `back\slash`, "\b\f\n\r\t\x00\x1f\x7f", "é € 😀 \u2028",
	"bad \xff utf-8 \xc3", "\xed\xa0\x80", "tail\xe2\x82",
}

func TestWriteCanonicalStringMatchesRuneRule(t *testing.T) {
	for _, s := range canonicalStrings {
		assertCanonicalString(t, s)
	}
}

func FuzzWriteCanonicalString(f *testing.F) {
	for _, s := range canonicalStrings {
		f.Add(s)
	}
	f.Fuzz(assertCanonicalString)
}

func assertCanonicalString(t *testing.T, s string) {
	var b bytes.Buffer
	writeCanonicalString(&b, s)
	if got, want := b.String(), referenceCanonicalString(s); got != want {
		t.Fatalf("writeCanonicalString(%q) = %s, want %s", s, got, want)
	}
}
