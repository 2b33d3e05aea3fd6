package mapping

import "strings"

// ConversationID accepts only the server's own id forms, a UUID
// dashed (what ConversationInfo.id carries) or as 32 hex digits (what
// its paging uses), and returns the dashed lowercase form, which is how
// the server (Python's str(UUID)) spells it: the id becomes a path
// segment of REST calls and of the socket URL, so nothing else may pass.
func ConversationID(id string) (string, bool) {
	var digits string
	switch len(id) {
	case 36:
		if id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
			return "", false
		}
		digits = id[:8] + id[9:13] + id[14:18] + id[19:23] + id[24:]
	case 32:
		digits = id
	default:
		return "", false
	}
	digits = strings.ToLower(digits)
	if strings.Trim(digits, "0123456789abcdef") != "" {
		return "", false
	}
	return digits[:8] + "-" + digits[8:12] + "-" + digits[12:16] + "-" + digits[16:20] + "-" + digits[20:], true
}
