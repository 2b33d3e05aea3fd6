package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxStem bounds an escaped name, in bytes: with ".{n}.jsonl.gz" after it
// a file name stays under the 255 bytes most filesystems allow.
const maxStem = 200

// hashMark separates a long name's kept prefix from its hash; escapeName
// escapes it everywhere else, so only a hashed name holds it.
const hashMark = '~'

// escapeName maps an agent or session id to a file name stem that is safe
// on any filesystem and distinct for distinct ids (README "Layout"):
//
//   - a-z, 0-9, '-' and '_' stay as they are;
//   - every other byte, '.' and upper-case letters included, becomes '%'
//     and two lower-case hex digits, so a stem holds no path separator,
//     no dot (".", "..", hidden files and the ".{n}.jsonl" suffix cannot
//     be forged), no NUL and no upper case (two ids that differ in case
//     stay two files on a case-insensitive filesystem);
//   - a stem that Windows reserves (con, nul, com1, …) has its first byte
//     escaped too;
//   - a stem longer than maxStem keeps a prefix and ends in '~' and the
//     SHA-256 of the id.
//
// Escapes decode back to the id, so two ids never share a stem, short or
// reserved; two long ids share one only if their SHA-256 collide.
func escapeName(id string) string {
	var b strings.Builder
	b.Grow(len(id))
	for i := range len(id) {
		c := id[i]
		if isPlainByte(c) {
			b.WriteByte(c)
			continue
		}
		writeEscape(&b, c)
	}
	stem := b.String()
	if isReservedOnWindows(stem) {
		var r strings.Builder
		writeEscape(&r, stem[0])
		stem = r.String() + stem[1:]
	}
	if len(stem) <= maxStem {
		return stem
	}
	sum := sha256.Sum256([]byte(id))
	keep := maxStem - 1 - 2*len(sum)
	// Cut before an escape, never inside one.
	if i := strings.LastIndexByte(stem[:keep], '%'); i >= keep-2 {
		keep = i
	}
	return stem[:keep] + string(hashMark) + hex.EncodeToString(sum[:])
}

func isPlainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func writeEscape(b *strings.Builder, c byte) {
	const digits = "0123456789abcdef"
	b.WriteByte('%')
	b.WriteByte(digits[c>>4])
	b.WriteByte(digits[c&0xf])
}

// isReservedOnWindows reports device names Windows refuses as a file name,
// whatever the extension.
func isReservedOnWindows(stem string) bool {
	switch stem {
	case "con", "prn", "aux", "nul":
		return true
	}
	return len(stem) == 4 && (strings.HasPrefix(stem, "com") || strings.HasPrefix(stem, "lpt")) && stem[3] >= '0' && stem[3] <= '9'
}

// segmentName is the file name of a stem's segment n: {stem}.jsonl first,
// then {stem}.1.jsonl, {stem}.2.jsonl, … as the size rotation continues it.
func segmentName(stem string, n int) string {
	if n == 0 {
		return stem + ".jsonl"
	}
	return stem + "." + strconv.Itoa(n) + ".jsonl"
}
