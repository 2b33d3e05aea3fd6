package projection

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

const (
	propertySeed       = 0x5eed_0aeb
	propertyIterations = 2000
)

// TestRoundTripProperty projects random valid events and inverts them along
// every round-trip path. Each iteration has its own seed, so a failure names
// the one event to replay with randomEvent(newRand(seed)).
func TestRoundTripProperty(t *testing.T) {
	for i := range uint64(propertyIterations) {
		seed := propertySeed + i
		ev := randomEvent(newRand(seed))
		if err := roundTrip(ev); err != nil {
			raw, _ := ev.MarshalJSON()
			t.Fatalf("seed %d: %v\nevent: %s", seed, err, raw)
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func randomEvent(r *rand.Rand) *aep.Event {
	ev := &aep.Event{
		AEP:    aep.Version,
		ID:     randomText(r, 1),
		Type:   pick(r, "tool.completed", "session.started", "agent.presence", "x.open-hands.session.config_change", "control.cancel"),
		Time:   randomTime(r),
		Source: "aep://" + randomText(r, 1),
		Agent:  randomText(r, 1),
	}
	for _, s := range []*string{&ev.Subject, &ev.Session, &ev.Run, &ev.Step, &ev.Cause} {
		if r.IntN(2) == 0 {
			*s = randomText(r, 1)
		}
	}
	ev.Seq, ev.Epoch = randomCounter(r), randomCounter(r)
	if r.IntN(2) == 0 {
		ev.Traceparent = randomTraceparent(r)
	}
	if r.IntN(3) > 0 {
		ev.Severity = pick(r, aep.SeverityDebug, aep.SeverityInfo, aep.SeverityNotice,
			aep.SeverityWarning, aep.SeverityError, aep.SeverityCritical)
	}
	if r.IntN(3) > 0 {
		ev.Capture = pick(r, aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull)
	}
	for range r.IntN(4) {
		name := randomExtensionName(r)
		var value any
		switch r.IntN(3) {
		case 0:
			value = randomText(r, 0)
		case 1:
			value = r.Int64() - r.Int64()
		default:
			value = r.IntN(2) == 0
		}
		if err := ev.SetExtension(name, value); err != nil {
			panic(err) // randomExtensionName only yields valid names
		}
	}
	switch r.IntN(10) {
	case 0, 1:
		// no data
	case 2:
		ev.Data = map[string]any{}
	default:
		ev.Data = randomObject(r, 3, true)
	}
	return ev
}

func pick[T any](r *rand.Rand, choices ...T) T { return choices[r.IntN(len(choices))] }

// textRunes mixes what JSON escapes, multi-byte UTF-8 and surrogate-pair
// runes with plain ASCII.
var textRunes = []rune("abcXYZ019 _-./:\"\\\n\t\x01\x7féü€\u2028😀𝄞")

func randomText(r *rand.Rand, minLen int) string {
	var b strings.Builder
	for range minLen + r.IntN(12) {
		b.WriteRune(textRunes[r.IntN(len(textRunes))])
	}
	return b.String()
}

func randomCounter(r *rand.Rand) *int64 {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return aep.Int64(0)
	case 2:
		return aep.Int64(math.MaxInt64)
	default:
		return aep.Int64(r.Int64N(1 << 40))
	}
}

// randomTime renders an instant in [1970, 2508) with 0–9 fraction digits
// in UTC ("Z") or at an offset; a third of the times use the default
// rendering, which needs no aep.wire.time.
func randomTime(r *rand.Rand) string {
	t := time.Unix(r.Int64N(17e9), r.Int64N(1e9))
	if r.IntN(3) == 0 {
		return string(appendDefaultTime(nil, uint64(t.Truncate(time.Microsecond).UnixNano())))
	}
	zone := time.UTC
	if r.IntN(2) == 0 {
		zone = time.FixedZone("", (r.IntN(113)-56)*15*60) // -14:00 … +14:00
	}
	text := t.In(zone).Format("2006-01-02T15:04:05")
	if digits := r.IntN(10); digits > 0 {
		text += "." + fmt.Sprintf("%09d", t.Nanosecond())[:digits]
	}
	return text + t.In(zone).Format("Z07:00")
}

func randomTraceparent(r *rand.Rand) string {
	var traceID [16]byte
	var spanID [8]byte
	if r.IntN(8) > 0 {
		fillRandom(r, traceID[:])
	}
	if r.IntN(8) > 0 {
		fillRandom(r, spanID[:])
	}
	version := "00"
	if r.IntN(4) == 0 {
		version = fmt.Sprintf("%02x", r.IntN(256))
	}
	return fmt.Sprintf("%s-%s-%s-%02x", version, hex.EncodeToString(traceID[:]), hex.EncodeToString(spanID[:]), r.IntN(256))
}

func fillRandom(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
}

func randomExtensionName(r *rand.Rand) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	for {
		b := make([]byte, 1+r.IntN(20))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if name := string(b); !aep.IsCoreAttribute(name) {
			return name
		}
	}
}

// randomObject builds a data object; at the top level some keys are gen_ai.*
// (hoisted), deeper down they stay in place.
func randomObject(r *rand.Rand, depth int, top bool) map[string]any {
	m := make(map[string]any)
	for range r.IntN(7) {
		key := randomText(r, 0)
		if r.IntN(4) == 0 {
			key = GenAIPrefix + key
		}
		m[key] = randomValue(r, depth)
	}
	if top && r.IntN(4) == 0 {
		m["gen_ai.usage.input_tokens"] = json.Number(strconv.Itoa(r.IntN(1e6)))
	}
	return m
}

func randomValue(r *rand.Rand, depth int) any {
	kinds := 6
	if depth > 0 {
		kinds = 8
	}
	switch r.IntN(kinds) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return randomText(r, 0)
	case 3:
		return randomInteger(r)
	case 4, 5:
		return randomFloat(r)
	case 6:
		s := make([]any, r.IntN(5))
		for i := range s {
			s[i] = randomValue(r, depth-1)
		}
		return s
	default:
		return randomObject(r, depth-1, false)
	}
}

func randomInteger(r *rand.Rand) json.Number {
	switch r.IntN(5) {
	case 0:
		return json.Number(pick(r, "0", "-0", "9223372036854775807", "-9223372036854775808"))
	case 1: // beyond int64: kept as the double canonical JSON uses
		return json.Number(pick(r, "", "-") + "1" + strconv.FormatUint(r.Uint64(), 10) + "7")
	default:
		return json.Number(strconv.FormatInt(r.Int64N(1<<53)-1<<52, 10))
	}
}

func randomFloat(r *rand.Rand) json.Number {
	f := r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
	switch r.IntN(4) {
	case 0:
		return json.Number(strconv.FormatFloat(f, 'e', -1, 64))
	case 1:
		return json.Number(strings.ToUpper(strconv.FormatFloat(f, 'E', 4, 64)))
	case 2:
		return json.Number(strconv.FormatFloat(math.Round(f), 'f', 1, 64)) // "12.0"
	default:
		return json.Number(strconv.FormatFloat(f, 'f', -1, 64))
	}
}
