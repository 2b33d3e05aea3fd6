package aep

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixturePath points at the copied conformance fixtures.
func fixturePath(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "testdata", "aep", "fixtures"}, parts...)...)
}

func goldenLines(t testing.TB) [][]byte {
	t.Helper()
	f, err := os.Open(fixturePath("golden", "golden.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			lines = append(lines, append([]byte(nil), line...))
		}
	}
	require.NoError(t, sc.Err())
	return lines
}

func TestGoldenRoundTrip(t *testing.T) {
	for i, line := range goldenLines(t) {
		t.Run(fmt.Sprintf("line%02d", i), func(t *testing.T) {
			ev, err := Parse(line)
			require.NoError(t, err)
			out, err := json.Marshal(ev)
			require.NoError(t, err)
			want, err := canonicalOf(line)
			require.NoError(t, err)
			got, err := canonicalOf(out)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
			assert.NotContains(t, string(out), "null", "absent optionals are omitted, never null")
		})
	}
}

func canonicalOf(raw []byte) ([]byte, error) {
	v, err := DecodeValue(raw)
	if err != nil {
		return nil, err
	}
	return Canonical(v)
}

func TestMarshalOmitsAbsentAndKeepsExtensions(t *testing.T) {
	ev := Event{AEP: Version, ID: "01", Type: "run.started", Time: "2026-07-03T10:00:00Z",
		Source: "aep://h/agent/a", Agent: "a", Session: "s", Seq: Int64(0),
		Extensions: map[string]any{"acmeregion": "eu-1", "acmedrops": int64(3), "acmeflag": true}}
	out, err := json.Marshal(ev)
	require.NoError(t, err)
	assert.JSONEq(t, `{"aep":"0.1","id":"01","type":"run.started","time":"2026-07-03T10:00:00Z",
		"source":"aep://h/agent/a","agent":"a","session":"s","seq":0,
		"acmedrops":3,"acmeflag":true,"acmeregion":"eu-1"}`, string(out))
}

// TestMarshalBytes pins the wire form byte for byte: attributes in wire
// order, extensions and data keys sorted (a map of more than 16 keys
// too), numbers as they are.
func TestMarshalBytes(t *testing.T) {
	data := map[string]any{"tool": map[string]any{"name": "Bash", "call_id": "t_91"}, "duration_ms": json.Number("1240")}
	for i := range 18 {
		data[fmt.Sprintf("k%02d", 17-i)] = i%2 == 0
	}
	ev := Event{AEP: Version, ID: "01", Type: "tool.completed", Subject: "Bash", Time: "2026-07-03T10:00:00Z",
		Source: "aep://h/agent/a", Agent: "a", Session: "s", Run: "r", Step: "turn-3",
		Seq: Int64(1234), Epoch: Int64(60_000_000), Cause: "00", Severity: SeverityInfo, Capture: CaptureMetadata,
		Extensions: map[string]any{"zeta": "z", "acmedrops": int64(-3), "acmeflag": true},
		Data:       data}
	out, err := ev.MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, `{"aep":"0.1","id":"01","type":"tool.completed","subject":"Bash","time":"2026-07-03T10:00:00Z","source":"aep://h/agent/a","agent":"a","session":"s","run":"r","step":"turn-3","seq":1234,"epoch":60000000,"cause":"00","severity":"info","capture":"metadata","acmedrops":-3,"acmeflag":true,"zeta":"z",`+
		`"data":{"duration_ms":1240,"k00":false,"k01":true,"k02":false,"k03":true,"k04":false,"k05":true,"k06":false,"k07":true,"k08":false,"k09":true,"k10":false,"k11":true,"k12":false,"k13":true,"k14":false,"k15":true,"k16":false,"k17":true,"tool":{"call_id":"t_91","name":"Bash"}}}`, string(out))
}

func TestExtensionRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		name  string
		value any
	}{
		"ill-formed name": {"Acme-Region", "x"},
		"too long":        {"abcdefghijklmnopqrstu", "x"},
		"collides":        {"session", "x"},
		"object value":    {"acmeobj", map[string]any{"a": 1}},
		"array value":     {"acmearr", []any{1}},
		"float value":     {"acmefloat", json.Number("1.5")},
		"null value":      {"acmenull", nil},
	} {
		t.Run(name, func(t *testing.T) {
			var ev Event
			assert.ErrorIs(t, ev.SetExtension(tc.name, tc.value), ErrExtension)
			ev.Extensions = map[string]any{tc.name: tc.value}
			_, err := json.Marshal(ev)
			assert.True(t, errors.Is(err, ErrExtension), "marshal must refuse: %v", err)
		})
	}
}

func TestUnmarshalKeepsUnknownAttributes(t *testing.T) {
	ev, err := Parse([]byte(`{"aep":"0.1","id":"1","type":"x.v.a.b","time":"2026-07-03T10:00:00Z","source":"aep://h","agent":"a","session":"s","seq":1,"zzz":{"nested":1},"acmen":7}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"zzz": map[string]any{"nested": json.Number("1")}, "acmen": int64(7)}, ev.Extensions)
}

func TestUnmarshalRejectsWrongCoreTypes(t *testing.T) {
	for _, raw := range []string{`[]`, `null`, `{"seq":"1"}`, `{"seq":1.5}`, `{"id":3}`, `{"data":[1]}`} {
		_, err := Parse([]byte(raw))
		assert.Error(t, err, raw)
	}
}

func TestCanonicalNumbers(t *testing.T) {
	// RFC 8785 Appendix B sample numbers (as IEEE-754 values).
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "1": "1", "1.0": "1", "-1.5": "-1.5",
		"1e21": "1e+21", "1e20": "100000000000000000000", "0.000001": "0.000001",
		"1e-7": "1e-7", "9007199254740991": "9007199254740991",
		"295147905179352830000": "295147905179352830000",
		"4.50":                  "4.5", "2e-3": "0.002", "0.000001234": "0.000001234",
		"1.7976931348623157e308": "1.7976931348623157e+308", "5e-324": "5e-324",
		"333333333.3333333": "333333333.3333333",
	} {
		got, err := Canonical(json.Number(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, string(got), in)
	}
}

func TestCanonicalObjectsAndStrings(t *testing.T) {
	v, err := DecodeValue([]byte(`{"b":[1,{"z":true,"a":null}],"a":"<&>\u2028\n\u0001é","\u20ac":1,"\ud83d\ude00":2,"\u0080":3}`))
	require.NoError(t, err)
	got, err := Canonical(v)
	require.NoError(t, err)
	assert.Equal(t, "{\"a\":\"<&>\u2028\\n\\u0001é\",\"b\":[1,{\"a\":null,\"z\":true}],\"\u0080\":3,\"€\":1,\"😀\":2}", string(got))
}

func TestDigestPinnedResult(t *testing.T) {
	// openhands.json observation_ok: result_digest over the observation text.
	d, err := Digest("total 4\nREADME.md")
	require.NoError(t, err)
	assert.Equal(t, "ad5c679d78b027a0fe8f7592a602326e", d)
}

func TestDeterministicID(t *testing.T) {
	ts := time.Date(2026, 7, 12, 10, 15, 0, 123456000, time.UTC)
	a := DeterministicID(ts, "src|ev_1|0")
	assert.Len(t, a, 26)
	assert.Regexp(t, `^[0-9A-HJKMNP-TV-Z]{26}$`, a)
	assert.Equal(t, a, DeterministicID(ts, "src|ev_1|0"))
	assert.NotEqual(t, a, DeterministicID(ts, "src|ev_1|1"))
	assert.NotEqual(t, a, DeterministicID(ts.Add(time.Millisecond), "src|ev_1|0"))
	// ULIDs sort by time: the first 10 characters encode the milliseconds.
	assert.Less(t, DeterministicID(ts, "z"), DeterministicID(ts.Add(time.Second), "a"))
	assert.Equal(t, "01K00000000000000000000000"[:1], DeterministicID(ts, "k")[:1])
	assert.Equal(t, "0000000000", DeterministicID(time.Unix(0, 0), "k")[:10])
	// The key is its parts joined by newlines, past the stack buffer too.
	assert.Equal(t, DeterministicID(ts, "src\nev_1\n0"), DeterministicID(ts, "src", "ev_1", "0"))
	long := strings.Repeat("x", 300)
	assert.Equal(t, DeterministicID(ts, "src\n"+long), DeterministicID(ts, "src", long))
	assert.NotEqual(t, DeterministicID(ts, "src"+long), DeterministicID(ts, "src", long))
}

func benchmarkEvent(b *testing.B) []byte {
	b.Helper()
	return goldenLines(b)[3] // tool.completed with traceparent, usage and cost
}

func BenchmarkParse(b *testing.B) {
	raw := benchmarkEvent(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	ev, err := Parse(benchmarkEvent(b))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalReceiverSeq is BenchmarkMarshal with the seq and epoch
// of a receiver's session some time in (epochs count seconds since 2025).
func BenchmarkMarshalReceiverSeq(b *testing.B) {
	ev, err := Parse(benchmarkEvent(b))
	require.NoError(b, err)
	ev.Seq, ev.Epoch = Int64(1234), Int64(60_000_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonical(b *testing.B) {
	ev, err := Parse(benchmarkEvent(b))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(ev); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStringAttribute(t *testing.T) {
	ev := Event{Type: "run.started", Severity: SeverityNotice}
	for name, want := range map[string]string{"type": "run.started", "severity": "notice", "subject": ""} {
		got, core := ev.StringAttribute(name)
		assert.True(t, core, name)
		assert.Equal(t, want, got, name)
	}
	for _, name := range []string{"seq", "epoch", "data", "acmeregion"} {
		_, core := ev.StringAttribute(name)
		assert.False(t, core, name)
	}
}

func TestWriteJSONStringMatchesTheEncoder(t *testing.T) {
	for _, s := range []string{
		"", "run:c1:2", "aep://otelcol-a/agent/openhands/session/c1", "2026-07-12T08:15:00.301Z",
		`a"b`, `a\b`, "tab\there", "nl\n", "\x00", "\x1f", "\x7f", "<&>", "é", "\u2028", "\xff", " ~",
	} {
		var fast, slow bytes.Buffer
		require.NoError(t, writeJSONString(&fast, s))
		require.NoError(t, writeJSON(&slow, s))
		assert.Equal(t, slow.String(), fast.String(), "%q", s)
	}
}

// TestWriteJSONValueMatchesTheEncoder pins the payload walk to the bytes
// and the refusals of the encoder it stands in for.
func TestWriteJSONValueMatchesTheEncoder(t *testing.T) {
	deep := map[string]any{"leaf": "x"}
	for range 2 * maxWalkDepth {
		deep = map[string]any{"d": []any{deep}}
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	values := []any{
		nil, true, false, "s", map[string]any(nil), []any(nil), map[string]any{}, []any{},
		map[string]any{"b": json.Number("1.50"), "a": []any{nil, false, "é\u2028<&>", map[string]any{"z": 1, "y": 2.5}}},
		map[string]any{"\xff": "k", "Ä": "x", "a": "\x00\x7f", "A": float64(1e21), "n": int64(-3)},
		map[string]any{"bad": json.Number("abc")},
		map[string]any{"nan": []any{math.NaN()}},
		map[string]any{"ch": make(chan int)},
		deep, cyclic,
	}
	for _, line := range goldenLines(t) {
		ev, err := Parse(line)
		require.NoError(t, err)
		values = append(values, ev.Data)
	}
	for i, v := range values {
		var fast, slow bytes.Buffer
		fastErr := writeJSONValue(&fast, v, maxWalkDepth)
		slowErr := writeJSON(&slow, v)
		if slowErr != nil {
			require.Error(t, fastErr, "value %d", i)
			assert.Equal(t, slowErr.Error(), fastErr.Error(), "value %d", i)
			continue
		}
		require.NoError(t, fastErr, "value %d", i)
		assert.Equal(t, slow.String(), fast.String(), "value %d", i)
	}
}
