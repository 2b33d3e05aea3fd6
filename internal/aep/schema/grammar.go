package schema

import (
	"math/big"
	"slices"
	"strings"
)

// The matchers below mirror the envelope schema's patterns (Go regexp
// semantics: $ is the end of the text, . is any rune but \n) and the
// schema library's date-time format. differential_test.go pins each to
// the original on generated strings.

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func isTokenByte(c byte) bool { return isLowerAlnum(c) || c == '_' }

func isVendorByte(c byte) bool { return isTokenByte(c) || c == '-' }

func isHexLower(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func all(s string, in func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !in(s[i]) {
			return false
		}
	}
	return true
}

// isExtensionName mirrors propertyNames: ^[a-z0-9]{1,20}$.
func isExtensionName(s string) bool {
	return len(s) >= 1 && len(s) <= 20 && all(s, isLowerAlnum)
}

// Categories are the registered type categories (AEP-0002 §3), as the
// envelope's type pattern lists them; differential_test.go pins the two.
var Categories = []string{"agent", "session", "run", "progress", "tool", "delegation", "attention",
	"resource", "error", "state", "assessment", "message", "control"}

// isCategory reports a registered type category.
func isCategory(s string) bool { return slices.Contains(Categories, s) }

// dottedTokens counts the [a-z0-9_]+ tokens of a dot-separated s; 0 when
// a token is empty or holds another byte.
func dottedTokens(s string) int {
	n, start := 1, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '.':
			if i == start {
				return 0
			}
			n, start = n+1, i+1
		case !isTokenByte(s[i]):
			return 0
		}
	}
	if start == len(s) {
		return 0
	}
	return n
}

// isEventType mirrors the type pattern:
// ^((category)(\.[a-z0-9_]+)+|x\.[a-z0-9_-]+\.[a-z0-9_]+(\.[a-z0-9_]+)+)$.
// No part may hold a dot, so splitting at dots is the only parse.
func isEventType(s string) bool {
	head, rest, ok := strings.Cut(s, ".")
	switch {
	case !ok:
		return false
	case isCategory(head):
		return dottedTokens(rest) >= 1
	case head == "x":
		vendor, rest, ok := strings.Cut(rest, ".")
		return ok && vendor != "" && all(vendor, isVendorByte) && dottedTokens(rest) >= 2
	}
	return false
}

// isForeignEmitterType mirrors the scope conditional's second if:
// ^(control\.attention\.respond|control\.cancel|control\.pause|control\.resume|x\.[a-z0-9_-]+\.control\..+|attention\.routed)$.
func isForeignEmitterType(s string) bool {
	switch s {
	case "control.attention.respond", "control.cancel", "control.pause", "control.resume", "attention.routed":
		return true
	}
	rest, ok := strings.CutPrefix(s, "x.")
	if !ok {
		return false
	}
	vendor, rest, ok := strings.Cut(rest, ".")
	if !ok || vendor == "" || !all(vendor, isVendorByte) {
		return false
	}
	rest, ok = strings.CutPrefix(rest, "control.")
	return ok && rest != "" && !strings.Contains(rest, "\n")
}

// isTraceparent mirrors ^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$.
func isTraceparent(s string) bool {
	if len(s) != 55 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 2 || i == 35 || i == 52 {
			if s[i] != '-' {
				return false
			}
		} else if !isHexLower(s[i]) {
			return false
		}
	}
	return true
}

// numberLiteral reports whether a JSON number literal is integral and
// whether it is below zero, as the schema library decides both (with
// big.Rat, whose limits on exponents it inherits).
func numberLiteral(lit string) (integer, negative bool) {
	digits := strings.TrimPrefix(lit, "-")
	if digits != "" && all(digits, isDigit) {
		return true, len(digits) < len(lit) && strings.Trim(digits, "0") != ""
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return false, false
	}
	return r.IsInt(), r.Sign() < 0
}

// isJSONNumber reports whether s is a JSON number literal (RFC 8259 §6),
// the test encoding/json applies before writing a json.Number.
func isJSONNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	switch {
	case s == "":
		return false
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = strings.TrimLeft(s, "0123456789")
	default:
		return false
	}
	if frac, ok := strings.CutPrefix(s, "."); ok {
		s = strings.TrimLeft(frac, "0123456789")
		if len(s) == len(frac) {
			return false
		}
	}
	if len(s) > 0 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
			s = s[1:]
		}
		exp := s
		s = strings.TrimLeft(exp, "0123456789")
		if len(s) == len(exp) {
			return false
		}
	}
	return s == ""
}

// dateTimeReason mirrors the schema library's date-time format
// (santhosh-tekuri/jsonschema v6 format.go, validateDateTime): RFC 3339
// with its leniencies kept (a two-digit field is read by strconv.Atoi,
// which also takes "+5" and "-0") and its leap-second rule (second 60
// only at 23:59 UTC). It returns why s is not one, "" when it is.
func dateTimeReason(s string) string {
	if len(s) < 20 {
		return "shorter than yyyy-mm-ddThh:mm:ssZ"
	}
	if s[10] != 't' && s[10] != 'T' {
		return "11th character must be t or T"
	}
	if !isDate(s[:10]) {
		return "invalid date"
	}
	t := s[11:] // at least 9 bytes
	if t[2] != ':' || t[5] != ':' {
		return "missing colon in the time"
	}
	h, okH := atoi2(t[0:2])
	m, okM := atoi2(t[3:5])
	sec, okS := atoi2(t[6:8])
	if !okH || !okM || !okS {
		return "invalid hour, minute or second"
	}
	if h > 23 || m > 59 || sec > 60 {
		return "hour, minute or second out of range"
	}
	t = t[8:]
	if frac, ok := strings.CutPrefix(t, "."); ok {
		t = strings.TrimLeft(frac, "0123456789")
		if len(t) == len(frac) {
			return "no digits in the second fraction"
		}
	}
	if t != "z" && t != "Z" {
		if len(t) != 6 {
			return "offset must be Z or ±hh:mm"
		}
		sign := 0
		switch t[0] {
		case '+':
			sign = -1
		case '-':
			sign = 1
		default:
			return "offset must begin with + or -"
		}
		if t[3] != ':' {
			return "missing colon in the offset"
		}
		zh, okH := atoi2(t[1:3])
		zm, okM := atoi2(t[4:6])
		if !okH || !okM || zh > 23 || zm > 59 {
			return "invalid offset"
		}
		// The library moves the time to UTC without wrapping past midnight.
		hm := h*60 + m + sign*(zh*60+zm)
		if hm < 0 {
			hm += 24 * 60
		}
		h, m = hm/60, hm%60
	}
	if sec == 60 && (h != 23 || m != 59) {
		return "leap second not at 23:59 UTC"
	}
	return ""
}

// atoi2 reads a two-byte field as strconv.Atoi does, refusing negatives
// as the library does: "07", "+7" and "-0" are read, "-7" is not.
func atoi2(f string) (int, bool) {
	switch {
	case isDigit(f[0]) && isDigit(f[1]):
		return int(f[0]-'0')*10 + int(f[1]-'0'), true
	case f[0] == '+' && isDigit(f[1]):
		return int(f[1] - '0'), true
	case f == "-0":
		return 0, true
	}
	return 0, false
}

// isDate mirrors time.Parse("2006-01-02", d) on ten bytes: four digits of
// year, a month 01-12 and a day that month has in that (proleptic
// Gregorian) year.
func isDate(d string) bool {
	if !all(d[0:4], isDigit) || d[4] != '-' || d[7] != '-' ||
		!all(d[5:7], isDigit) || !all(d[8:10], isDigit) {
		return false
	}
	year := int(d[0]-'0')*1000 + int(d[1]-'0')*100 + int(d[2]-'0')*10 + int(d[3]-'0')
	month := int(d[5]-'0')*10 + int(d[6]-'0')
	day := int(d[8]-'0')*10 + int(d[9]-'0')
	if month < 1 || month > 12 || day < 1 {
		return false
	}
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month]
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		days = 29
	}
	return day <= days
}
