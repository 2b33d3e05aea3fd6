package aep

import "fmt"

// Severity is the envelope severity (AEP-0001 §5.1 #15), ordered
// debug < info < notice < warning < error < critical.
type Severity string

// Severities in rank order.
const (
	SeverityDebug    Severity = "debug"
	SeverityInfo     Severity = "info"
	SeverityNotice   Severity = "notice"
	SeverityWarning  Severity = "warning"
	SeverityError    Severity = "error"
	SeverityCritical Severity = "critical"
)

var severityRank = map[Severity]int{
	SeverityDebug: 0, SeverityInfo: 1, SeverityNotice: 2,
	SeverityWarning: 3, SeverityError: 4, SeverityCritical: 5,
}

// Rank orders severities; it is -1 for an unknown value.
func (s Severity) Rank() int {
	if r, ok := severityRank[s]; ok {
		return r
	}
	return -1
}

// Capture is the envelope capture level (AEP-0001 §8), ordered
// none < metadata < redacted < full.
type Capture string

// Capture levels in rank order.
const (
	CaptureNone     Capture = "none"
	CaptureMetadata Capture = "metadata"
	CaptureRedacted Capture = "redacted"
	CaptureFull     Capture = "full"
)

var captureRank = map[Capture]int{
	CaptureNone: 0, CaptureMetadata: 1, CaptureRedacted: 2, CaptureFull: 3,
}

// Rank orders capture levels; it is -1 for an unknown value.
func (c Capture) Rank() int {
	if r, ok := captureRank[c]; ok {
		return r
	}
	return -1
}

// Allows reports whether content annotated at level need may ride under
// this level.
func (c Capture) Allows(need Capture) bool { return need.Rank() <= c.Rank() }

// ParseCapture checks a configured capture level.
func ParseCapture(s string) (Capture, error) {
	c := Capture(s)
	if c.Rank() < 0 {
		return "", fmt.Errorf("unknown capture level %q (want none, metadata, redacted or full)", s)
	}
	return c, nil
}
