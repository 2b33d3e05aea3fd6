package projection

import (
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// severityLevels is registry/severity.json: AEP severity to OTel text/number.
var severityLevels = map[aep.Severity]struct {
	text   string
	number plog.SeverityNumber
}{
	aep.SeverityDebug:    {"DEBUG", plog.SeverityNumberDebug},
	aep.SeverityInfo:     {"INFO", plog.SeverityNumberInfo},
	aep.SeverityNotice:   {"INFO2", plog.SeverityNumberInfo2},
	aep.SeverityWarning:  {"WARN", plog.SeverityNumberWarn},
	aep.SeverityError:    {"ERROR", plog.SeverityNumberError},
	aep.SeverityCritical: {"FATAL", plog.SeverityNumberFatal},
}

// severityFromNumber is the AEP-0005 §3.4 inverse bucketing: 1–8 debug,
// 9 info, 10–12 notice, 13–16 warning, 17–20 error, 21–24 critical.
func severityFromNumber(n plog.SeverityNumber) (aep.Severity, bool) {
	switch {
	case n >= 1 && n <= 8:
		return aep.SeverityDebug, true
	case n == 9:
		return aep.SeverityInfo, true
	case n >= 10 && n <= 12:
		return aep.SeverityNotice, true
	case n >= 13 && n <= 16:
		return aep.SeverityWarning, true
	case n >= 17 && n <= 20:
		return aep.SeverityError, true
	case n >= 21 && n <= 24:
		return aep.SeverityCritical, true
	}
	return "", false
}

// severityFromText maps a severity_text the projection writes back to its
// level, for records that carry no severity_number.
func severityFromText(text string) (aep.Severity, bool) {
	for sev, lvl := range severityLevels {
		if lvl.text == text {
			return sev, true
		}
	}
	return "", false
}

// timeToUnixNano is to_otlp's time rule: RFC 3339 with its offset honoured,
// truncated to microseconds. OTLP timestamps are unsigned, so instants
// before the Unix epoch (or past 2554) cannot be projected.
func timeToUnixNano(s string) (uint64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("time %q is not RFC 3339: %w", s, err)
	}
	sec, micros := t.Unix(), uint64(t.Nanosecond()/1000)
	if sec < 0 || uint64(sec) > (math.MaxUint64-micros*1000)/1e9 {
		return 0, fmt.Errorf("time %q is outside the OTLP timestamp range", s)
	}
	return uint64(sec)*1e9 + micros*1000, nil
}

// appendDefaultTime renders time_unix_nano the way the extras assume
// when aep.wire.time is absent: UTC, "Z", and 3, 6 or 9 fraction digits,
// the fewest that hold the value (golden events use 3).
func appendDefaultTime(dst []byte, ns uint64) []byte {
	t := time.Unix(int64(ns/1e9), int64(ns%1e9)).UTC()
	switch {
	case ns%1e6 == 0:
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000Z")
	case ns%1e3 == 0:
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000000Z")
	default:
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000000000Z")
	}
}

// maxDefaultTimeLen is the length of appendDefaultTime's longest text
// within the OTLP range (9 fraction digits, a four-digit year).
const maxDefaultTimeLen = len("2006-01-02T15:04:05.000000000Z")

// traceContext is a parsed W3C traceparent.
type traceContext struct {
	version string
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
	flags   byte
}

// parseTraceparent checks the schema pattern and splits the traceparent.
func parseTraceparent(s string) (traceContext, error) {
	var tc traceContext
	var flags [1]byte
	if len(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' ||
		!isLowerHex(s[:2]) || !decodeLowerHex(tc.traceID[:], s[3:35]) ||
		!decodeLowerHex(tc.spanID[:], s[36:52]) || !decodeLowerHex(flags[:], s[53:]) {
		return tc, fmt.Errorf("traceparent %q does not match ^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$", s)
	}
	tc.version, tc.flags = s[:2], flags[0]
	return tc, nil
}

func decodeLowerHex(dst []byte, src string) bool {
	if !isLowerHex(src) {
		return false
	}
	_, err := hex.Decode(dst, []byte(src))
	return err == nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// String writes the traceparent; tc.version is two hex digits (the
// callers check it), so the text is always 55 bytes.
func (tc traceContext) String() string {
	var b [55]byte
	copy(b[:2], tc.version)
	b[2], b[35], b[52] = '-', '-', '-'
	hex.Encode(b[3:35], tc.traceID[:])
	hex.Encode(b[36:52], tc.spanID[:])
	hex.Encode(b[53:], []byte{tc.flags})
	return string(b[:])
}
