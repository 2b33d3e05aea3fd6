package aep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical returns the RFC 8785 (JCS) serialization of a decoded JSON value:
// object members sorted by their UTF-16 code units, no insignificant white
// space, minimal string escaping and ECMAScript number formatting.
//
// v may hold map[string]any, []any, string, bool, nil, json.Number, the Go
// integer and float kinds, or an *Event / Event (serialized as its wire form).
func Canonical(v any) ([]byte, error) {
	var out []byte
	err := withCanonical(v, func(c []byte) { out = bytes.Clone(c) })
	return out, err
}

// withCanonical hands use v's canonical JSON in a pooled buffer, valid
// only during the call.
func withCanonical(v any, use func([]byte)) error {
	b := borrowBuffer()
	defer returnBuffer(b)
	if err := writeCanonical(b, v); err != nil {
		return err
	}
	use(b.Bytes())
	return nil
}

// Digest is the AEP-0003 §9.3 content digest: SHA-256 over the canonical
// JSON of the original (pre-redaction) content, hex of the first 16 bytes.
func Digest(v any) (string, error) {
	sum, err := CanonicalSum(v)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:16]), nil
}

// CanonicalSum is the SHA-256 of v's canonical JSON, hashed where it is
// written rather than copied out first.
func CanonicalSum(v any) (sum [sha256.Size]byte, err error) {
	err = withCanonical(v, func(c []byte) { sum = sha256.Sum256(c) })
	return sum, err
}

func writeCanonical(b *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case string:
		writeCanonicalString(b, t)
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return fmt.Errorf("canonical json: number %q: %w", t, err)
		}
		return writeCanonicalNumber(b, f)
	case float64:
		return writeCanonicalNumber(b, t)
	case float32:
		return writeCanonicalNumber(b, float64(t))
	case int:
		return writeCanonicalNumber(b, float64(t))
	case int32:
		return writeCanonicalNumber(b, float64(t))
	case int64:
		return writeCanonicalNumber(b, float64(t))
	case uint64:
		return writeCanonicalNumber(b, float64(t))
	case []any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, x); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		var keyBuf [smallMap]string // a small map's keys sort on the stack
		keys := keyBuf[:0]
		if len(t) > len(keyBuf) {
			keys = make([]string, 0, len(t))
		}
		ascii := true
		for k := range t {
			keys = append(keys, k)
			ascii = ascii && isASCII(k)
		}
		if ascii {
			slices.Sort(keys) // byte order is UTF-16 order for ASCII
		} else {
			slices.SortFunc(keys, compareUTF16)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonicalString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, t[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case Event:
		return writeCanonicalEvent(b, &t)
	case *Event:
		return writeCanonicalEvent(b, t)
	default:
		return fmt.Errorf("canonical json: unsupported value of type %T", v)
	}
	return nil
}

// writeCanonicalEvent writes the event's wire form canonically, without
// a marshal and re-decode round trip.
func writeCanonicalEvent(b *bytes.Buffer, e *Event) error {
	m := make(map[string]any, len(coreNames)+len(e.Extensions))
	for name, ext := range e.Extensions {
		if err := CheckExtension(name, ext); err != nil {
			return err
		}
		m[name] = ext
	}
	for _, name := range coreNames {
		if p := e.stringAttribute(name); p != nil && *p != "" {
			m[name] = *p
		}
	}
	if e.Seq != nil {
		m["seq"] = *e.Seq
	}
	if e.Epoch != nil {
		m["epoch"] = *e.Epoch
	}
	if e.Data != nil {
		m["data"] = e.Data
	}
	return writeCanonical(b, m)
}

// compareUTF16 orders strings by UTF-16 code units, as RFC 8785 §3.2.3
// sorts.
func compareUTF16(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// writeCanonicalString writes s quoted, escaping as RFC 8785 §3.2.2.2
// says; invalid UTF-8 reads as U+FFFD, as ranging over s does. Runs that
// need no escape are written whole.
func writeCanonicalString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		b.WriteString(s[start:i])
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteRune(utf8.RuneError) // an invalid byte
			}
		}
		i++
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// writeCanonicalNumber formats like ECMAScript Number.prototype.toString
// (RFC 8785 §3.2.2.3): shortest round-trip digits, plain notation for
// exponents in [-6, 21), otherwise d.ddde±x.
func writeCanonicalNumber(b *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("canonical json: %v is not a JSON number", f)
	}
	if f == 0 {
		b.WriteByte('0') // -0 too.
		return nil
	}
	if f < 0 {
		b.WriteByte('-')
		f = -f
	}
	// Shortest digits and decimal exponent: "d.dddde±xx".
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	n := exp + 1 // position of the decimal point relative to digits
	k := len(digits)
	switch {
	case k <= n && n <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		b.WriteString(digits[:n])
		b.WriteByte('.')
		b.WriteString(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n))
		b.WriteString(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(n - 1))
	}
	return nil
}
