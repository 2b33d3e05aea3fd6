package mapping

import "strings"

const vendorPrefix = "x.openhands."

// VendorType names the vendor-plane type of an OpenHands kind, mechanically
// (design record, "Field maps"; AEP brief §4.2): CamelCase to snake_case
// with acronym runs split (ACPToolCallEvent → acp_tool_call_event), drop one
// trailing "_event", turn the last "_" into "." (family.leaf), or append
// ".event" to a single segment, and prefix "x.openhands.".
//
// Every input yields a type the envelope grammar accepts: characters other
// than ASCII letters and digits separate words, and a kind with no letters
// or digits at all names "x.openhands.unknown.event".
func VendorType(kind string) string {
	if typ, ok := knownVendorTypes[kind]; ok {
		return typ
	}
	return vendorType(kind)
}

// knownVendorTypes are the known kinds' vendor types, worked out once: a
// vendor-plane event, and the decorator for every output, looks one up.
var knownVendorTypes = func() map[string]string {
	types := make(map[string]string, len(knownKinds))
	for kind := range knownKinds {
		types[kind] = vendorType(kind)
	}
	return types
}()

// vendorType works VendorType out.
func vendorType(kind string) string {
	snake := strings.TrimSuffix(snakeCase(kind), "_event")
	if snake == "" {
		snake = "unknown"
	}
	if i := strings.LastIndexByte(snake, '_'); i >= 0 {
		return vendorPrefix + snake[:i] + "." + snake[i+1:]
	}
	return vendorPrefix + snake + ".event"
}

// snakeCase lowercases s and puts one "_" at every word boundary: before an
// upper-case letter that follows a lower-case letter or a digit, before the
// last capital of an acronym run that starts a word (the "T" of "ACPTool"),
// and in place of every run of other characters. The result never starts
// or ends with "_" and never holds "__".
func snakeCase(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 4)
	pendingBreak := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isUpper(c):
			if i > 0 && (isLower(s[i-1]) || isDigit(s[i-1]) ||
				(isUpper(s[i-1]) && i+1 < len(s) && isLower(s[i+1]))) {
				pendingBreak = true
			}
			c += 'a' - 'A'
		case isLower(c) || isDigit(c):
		default:
			pendingBreak = true
			continue
		}
		if pendingBreak && b.Len() > 0 {
			b.WriteByte('_')
		}
		pendingBreak = false
		b.WriteByte(c)
	}
	return b.String()
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
