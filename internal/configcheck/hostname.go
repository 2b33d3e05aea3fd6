package configcheck // import "github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"

import "regexp"

var hostLabels = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// IsHostName reports a DNS name (at most 253 bytes) or an IPv4 address:
// what an AEP source's authority may carry without escaping.
func IsHostName(s string) bool { return len(s) <= 253 && hostLabels.MatchString(s) }
