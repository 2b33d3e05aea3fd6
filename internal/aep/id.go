package aep

import (
	"crypto/sha256"
	"time"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// DeterministicID returns a 26-character ULID-shaped id: the time part is t
// in Unix milliseconds (48 bits), the entropy part the first 80 bits of
// SHA-256(key). The same (t, key) always yields the same id, so a replayed
// vendor fact maps to the same AEP id and consumers dedupe it on
// (source, id). Instants before the Unix epoch clamp to 0. The key is its
// parts joined by newlines, written in a stack buffer rather than built.
func DeterministicID(t time.Time, keyParts ...string) string {
	ms := t.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	var buf [256]byte
	key := buf[:0]
	for i, part := range keyParts {
		if i > 0 {
			key = append(key, '\n')
		}
		key = append(key, part...)
	}
	sum := sha256.Sum256(key)
	var raw [16]byte
	for i := 5; i >= 0; i-- {
		raw[i] = byte(ms)
		ms >>= 8
	}
	copy(raw[6:], sum[:10])
	return encodeULID(raw)
}

// encodeULID writes 128 bits as 26 Crockford base32 characters (the first
// character carries the top 3 bits).
func encodeULID(raw [16]byte) string {
	var out [26]byte
	// Treat raw as a 130-bit big-endian number padded with two leading zero bits.
	var acc uint64
	bits := 2 // two zero bits of padding come first
	idx := 0
	for _, by := range raw {
		acc = acc<<8 | uint64(by)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[idx] = crockford[(acc>>uint(bits))&31]
			idx++
		}
	}
	return string(out[:])
}
