package projection

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func fixturePath(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "..", "testdata", "aep", "fixtures"}, parts...)...)
}

// goldenEvents parses golden.jsonl; index i is the fixture's golden line
// index (otlp-expected.json keys).
func goldenEvents(t testing.TB) []*aep.Event {
	t.Helper()
	f, err := os.Open(fixturePath("golden", "golden.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var events []*aep.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		ev, err := aep.Parse(line)
		require.NoError(t, err, "golden line %d", len(events))
		events = append(events, ev)
	}
	require.NoError(t, sc.Err())
	return events
}

// project runs the forward projection into a fresh Logs, the way an
// exporter would, and returns the record and its resource.
func project(t testing.TB, ev *aep.Event, opts Options) (plog.LogRecord, pcommon.Resource) {
	t.Helper()
	logs := plog.NewLogs()
	rl := logs.ResourceLogs().AppendEmpty()
	SetResource(rl.Resource(), ev.Agent)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	require.NoError(t, ToLogRecord(ev, lr, opts))
	return lr, rl.Resource()
}

// simplify builds the fixture's simplified LogRecord dict, without the
// lossless extras.
func simplify(lr plog.LogRecord, res pcommon.Resource) map[string]any {
	attrs := lr.Attributes().AsRaw()
	for k := range attrs {
		if IsWireAttribute(k) {
			delete(attrs, k)
		}
	}
	out := map[string]any{
		"time_unix_nano":  uint64(lr.Timestamp()),
		"event_name":      lr.EventName(),
		"severity_text":   lr.SeverityText(),
		"severity_number": int32(lr.SeverityNumber()),
		"resource":        res.Attributes().AsRaw(),
		"attributes":      attrs,
	}
	if tid := lr.TraceID(); !tid.IsEmpty() {
		sid := lr.SpanID()
		out["trace_id"] = hex.EncodeToString(tid[:])
		out["span_id"] = hex.EncodeToString(sid[:])
		out["flags"] = uint32(lr.Flags())
	}
	if lr.Body().Type() != pcommon.ValueTypeEmpty {
		out["body"] = lr.Body().AsRaw()
	}
	return out
}

// exactJSON decodes raw with numbers as json.Number, so that comparisons
// see every digit (time_unix_nano exceeds float64 precision).
func exactJSON(t *testing.T, raw []byte) any {
	t.Helper()
	v, err := aep.DecodeValue(raw)
	require.NoError(t, err)
	return v
}

func TestToLogRecordMatchesFixture(t *testing.T) {
	raw, err := os.ReadFile(fixturePath("otlp", "otlp-expected.json"))
	require.NoError(t, err)
	var expected map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &expected))
	events := goldenEvents(t)

	cases := []struct {
		line int
		opts Options
	}{
		{line: 3},
		{line: 13},
		// tool.failed at capture redacted: the reference default max_capture
		// (metadata) drops the whole payload and keeps aep.capture.
		{line: 15, opts: Options{MaxCapture: aep.CaptureMetadata}},
		{line: 24},
	}
	var covered []string
	for _, tc := range cases {
		key := fmt.Sprint(tc.line)
		covered = append(covered, key)
		t.Run("case"+key, func(t *testing.T) {
			want, ok := expected[key]
			require.True(t, ok, "otlp-expected.json has no case %q", key)
			lr, res := project(t, events[tc.line], tc.opts)
			got, err := json.Marshal(simplify(lr, res))
			require.NoError(t, err)
			assert.Equal(t, exactJSON(t, want), exactJSON(t, got))
		})
	}
	assert.ElementsMatch(t, slices.Collect(maps.Keys(expected)), covered, "every fixture case has a subtest")
}

// roundTrips lists the paths a projected record takes back to the inverse:
// in memory, and through both OTLP encodings.
var roundTrips = []struct {
	name string
	m    plog.Marshaler
	u    plog.Unmarshaler
}{
	{name: "memory"},
	{name: "otlp-proto", m: &plog.ProtoMarshaler{}, u: &plog.ProtoUnmarshaler{}},
	{name: "otlp-json", m: &plog.JSONMarshaler{}, u: &plog.JSONUnmarshaler{}},
}

// roundTrip projects ev, carries the record along every path, inverts it,
// and reports the first path whose result differs from ev in canonical JSON.
func roundTrip(ev *aep.Event) error {
	want, err := aep.Canonical(ev)
	if err != nil {
		return fmt.Errorf("canonical original: %w", err)
	}
	logs := plog.NewLogs()
	rl := logs.ResourceLogs().AppendEmpty()
	SetResource(rl.Resource(), ev.Agent)
	if err := ToLogRecord(ev, rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty(), Options{}); err != nil {
		return err
	}
	if after, err := aep.Canonical(ev); err != nil || !bytes.Equal(after, want) {
		return fmt.Errorf("ToLogRecord modified the event (err %v)", err)
	}
	for _, path := range roundTrips {
		carried := logs
		if path.m != nil {
			buf, err := path.m.MarshalLogs(logs)
			if err != nil {
				return fmt.Errorf("%s: marshal: %w", path.name, err)
			}
			if carried, err = path.u.UnmarshalLogs(buf); err != nil {
				return fmt.Errorf("%s: unmarshal: %w", path.name, err)
			}
		}
		crl := carried.ResourceLogs().At(0)
		back, err := FromLogRecord(crl.ScopeLogs().At(0).LogRecords().At(0), crl.Resource())
		if err != nil {
			return fmt.Errorf("%s: %w", path.name, err)
		}
		got, err := aep.Canonical(back)
		if err != nil {
			return fmt.Errorf("%s: canonical result: %w", path.name, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: round trip differs:\n want %s\n  got %s", path.name, want, got)
		}
	}
	return nil
}

func TestGoldenRoundTrip(t *testing.T) {
	for i, ev := range goldenEvents(t) {
		t.Run(fmt.Sprintf("line%02d", i), func(t *testing.T) {
			assert.NoError(t, roundTrip(ev))
		})
	}
}

// baseEvent is golden line 3, the AEP-0005 worked example.
func baseEvent(t testing.TB) *aep.Event { return goldenEvents(t)[3] }

func wireKeys(lr plog.LogRecord) []string {
	var keys []string
	for k, v := range lr.Attributes().All() {
		if IsWireAttribute(k) {
			keys = append(keys, k+"="+v.AsString())
		}
	}
	sort.Strings(keys)
	return keys
}

func TestLosslessExtrasOnlyWhenNeeded(t *testing.T) {
	version := WireVersion + "=0.1"
	cases := []struct {
		name   string
		mutate func(*aep.Event)
		opts   Options
		want   []string
	}{
		{name: "worked example", mutate: func(*aep.Event) {}, want: []string{version}},
		{name: "severity absent", mutate: func(e *aep.Event) { e.Severity = "" },
			want: []string{WireSeverityDefaulted + "=true", version}},
		{name: "capture absent", mutate: func(e *aep.Event) { e.Capture = "" },
			want: []string{WireCaptureDefaulted + "=true", version}},
		{name: "time with offset", mutate: func(e *aep.Event) { e.Time = "2026-07-03T12:15:04.221+02:00" },
			want: []string{WireTime + "=2026-07-03T12:15:04.221+02:00", version}},
		{name: "time with six digits holding milliseconds", mutate: func(e *aep.Event) { e.Time = "2026-07-03T10:15:04.221000Z" },
			want: []string{WireTime + "=2026-07-03T10:15:04.221000Z", version}},
		{name: "time with microseconds", mutate: func(e *aep.Event) { e.Time = "2026-07-03T10:15:04.221007Z" },
			want: []string{version}},
		{name: "time with sub-microsecond digits", mutate: func(e *aep.Event) { e.Time = "2026-07-03T10:15:04.2210079Z" },
			want: []string{WireTime + "=2026-07-03T10:15:04.2210079Z", version}},
		{name: "time at the Unix epoch", mutate: func(e *aep.Event) { e.Time = "1970-01-01T00:00:00.000Z" },
			want: []string{WireTime + "=1970-01-01T00:00:00.000Z", version}},
		{name: "traceparent version 01", mutate: func(e *aep.Event) {
			e.Traceparent = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		}, want: []string{WireTraceparentVersion + "=01", version}},
		{name: "traceparent with zero trace id", mutate: func(e *aep.Event) {
			e.Traceparent = "00-00000000000000000000000000000000-00f067aa0ba902b7-00"
		}, want: []string{WireTraceparentVersion + "=00", version}},
		{name: "no traceparent", mutate: func(e *aep.Event) { e.Traceparent = "" }, want: []string{version}},
		{name: "data empty", mutate: func(e *aep.Event) { e.Data = map[string]any{} },
			want: []string{WireData + "=empty", version}},
		{name: "data absent", mutate: func(e *aep.Event) { e.Data = nil }, want: []string{version}},
		{name: "data dropped by the capture gate", mutate: func(*aep.Event) {},
			opts: Options{MaxCapture: aep.CaptureNone}, want: []string{WireData + "=dropped", version}},
		{name: "extensions", mutate: func(e *aep.Event) {
			e.Extensions = map[string]any{"acmeregion": "eu-1", "acmedrops": int64(3), "acmetest": true}
		}, want: []string{
			WireExtensionPrefix + "acmedrops=3", WireExtensionPrefix + "acmeregion=eu-1",
			WireExtensionPrefix + "acmetest=true", version,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := baseEvent(t)
			tc.mutate(ev)
			lr, res := project(t, ev, tc.opts)
			assert.Equal(t, tc.want, wireKeys(lr))
			back, err := FromLogRecord(lr, res)
			require.NoError(t, err)
			if tc.opts.MaxCapture == "" {
				want, err := aep.Canonical(ev)
				require.NoError(t, err)
				got, err := aep.Canonical(back)
				require.NoError(t, err)
				assert.Equal(t, string(want), string(got))
			}
		})
	}
}

func TestCaptureGate(t *testing.T) {
	events := goldenEvents(t)
	cases := []struct {
		name        string
		line        int
		opts        Options
		wantBody    bool
		wantGenAI   bool
		wantCapture string
	}{
		{name: "redacted event, no gate", line: 15, wantBody: true, wantCapture: "redacted"},
		{name: "redacted event at max metadata", line: 15, opts: Options{MaxCapture: aep.CaptureMetadata}, wantCapture: "redacted"},
		{name: "redacted event at max redacted", line: 15, opts: Options{MaxCapture: aep.CaptureRedacted}, wantBody: true, wantCapture: "redacted"},
		{name: "gen_ai keys dropped too", line: 59, opts: Options{MaxCapture: aep.CaptureMetadata}, wantCapture: "redacted"},
		{name: "gen_ai keys kept under the ceiling", line: 59, opts: Options{MaxCapture: aep.CaptureFull}, wantBody: true, wantGenAI: true, wantCapture: "redacted"},
		{name: "absent capture counts as metadata", line: 54, opts: Options{MaxCapture: aep.CaptureNone}, wantCapture: "metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lr, res := project(t, events[tc.line], tc.opts)
			assert.Equal(t, tc.wantBody, lr.Body().Type() == pcommon.ValueTypeMap)
			capture, _ := lr.Attributes().Get(AttrCapture)
			assert.Equal(t, tc.wantCapture, capture.Str(), "aep.capture keeps the original value")
			_, hasGenAI := lr.Attributes().Get("gen_ai.evaluation.name")
			assert.Equal(t, tc.wantGenAI, hasGenAI)
			back, err := FromLogRecord(lr, res)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBody, back.Data != nil, "a dropped payload comes back absent")
		})
	}
}

func TestNumberTyping(t *testing.T) {
	ev := baseEvent(t)
	ev.Data = exactJSON(t, []byte(`{
		"int": 42, "negative": -7, "max_int64": 9223372036854775807, "negative_zero": -0,
		"fraction": 0.04827, "integral_double": 1.0, "exponent": 1E3,
		"beyond_int64": 18446744073709551616, "huge": 123456789012345678901234567890
	}`)).(map[string]any)
	lr, res := project(t, ev, Options{})
	body := lr.Body().Map()
	wantTypes := map[string]pcommon.ValueType{
		"int": pcommon.ValueTypeInt, "negative": pcommon.ValueTypeInt, "max_int64": pcommon.ValueTypeInt,
		"negative_zero": pcommon.ValueTypeInt, "fraction": pcommon.ValueTypeDouble,
		"integral_double": pcommon.ValueTypeDouble, "exponent": pcommon.ValueTypeDouble,
		"beyond_int64": pcommon.ValueTypeDouble, "huge": pcommon.ValueTypeDouble,
	}
	for key, want := range wantTypes {
		v, ok := body.Get(key)
		require.True(t, ok, key)
		assert.Equal(t, want, v.Type(), key)
	}
	maxInt, _ := body.Get("max_int64")
	assert.Equal(t, int64(9223372036854775807), maxInt.Int(), "int64 digits are kept exactly")
	beyond, _ := body.Get("beyond_int64")
	assert.Equal(t, 18446744073709551616.0, beyond.Double())

	back, err := FromLogRecord(lr, res)
	require.NoError(t, err)
	assert.Equal(t, json.Number("9223372036854775807"), back.Data["max_int64"])
	want, err := aep.Canonical(ev.Data)
	require.NoError(t, err)
	got, err := aep.Canonical(back.Data)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

func TestFromLogRecordNotAEP(t *testing.T) {
	for _, name := range []string{"", "tool.completed", "dev.aepx.tool.completed", "dev.aep", "com.example.login"} {
		t.Run(fmt.Sprintf("event_name %q", name), func(t *testing.T) {
			lr, res := project(t, baseEvent(t), Options{})
			lr.SetEventName(name)
			ev, err := FromLogRecord(lr, res)
			require.ErrorIs(t, err, ErrNotAEP)
			assert.Nil(t, ev)
		})
	}
}

func TestFromLogRecordRejects(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(plog.LogRecord)
		wantErr string
	}{
		{"empty type", func(lr plog.LogRecord) { lr.SetEventName(EventNamePrefix) }, "no AEP type"},
		{"missing aep.agent_id", removeAttr(AttrAgentID), "aep.agent_id is missing"},
		{"missing aep.event_id", removeAttr(AttrEventID), "aep.event_id is missing"},
		{"missing aep.capture", removeAttr(AttrCapture), "aep.capture is missing"},
		{"missing aep.source", removeAttr(AttrSource), "aep.source is missing"},
		{"empty aep.wire.version", func(lr plog.LogRecord) { lr.Attributes().PutStr(WireVersion, "") }, "aep.wire.version is missing or empty"},
		{"aep.sequence not an int", func(lr plog.LogRecord) { lr.Attributes().PutStr(AttrSequence, "3") }, "aep.sequence: is Str, not an int"},
		{"aep.session_id not a string", func(lr plog.LogRecord) { lr.Attributes().PutInt(AttrSessionID, 3) }, "aep.session_id: is Int, not a string"},
		{"unknown capture", func(lr plog.LogRecord) { lr.Attributes().PutStr(AttrCapture, "secret") }, `"secret" is not a capture level`},
		{"unknown lossless extra", func(lr plog.LogRecord) { lr.Attributes().PutStr(WirePrefix+"future", "x") }, "unknown lossless extra"},
		{"ill-formed extension name", func(lr plog.LogRecord) { lr.Attributes().PutStr(WireExtensionPrefix+"Bad-Name", "x") }, "invalid extension attribute"},
		{"extension colliding with a core name", func(lr plog.LogRecord) { lr.Attributes().PutStr(WireExtensionPrefix+"seq", "x") }, "collides with a core attribute"},
		{"double extension", func(lr plog.LogRecord) { lr.Attributes().PutDouble(WireExtensionPrefix+"acme", 1.5) }, "not a string, int or bool"},
		{"unset timestamp", func(lr plog.LogRecord) { lr.SetTimestamp(0) }, "time_unix_nano is unset"},
		{"wire time disagrees", func(lr plog.LogRecord) {
			lr.Attributes().PutStr(WireTime, "2026-07-03T10:15:05.221Z")
		}, "but time_unix_nano is"},
		{"wire time unparsable", func(lr plog.LogRecord) { lr.Attributes().PutStr(WireTime, "yesterday") }, "is not RFC 3339"},
		{"severity defaulted but WARN", func(lr plog.LogRecord) {
			lr.Attributes().PutBool(WireSeverityDefaulted, true)
			lr.SetSeverityNumber(plog.SeverityNumberWarn)
		}, "not the materialized info"},
		{"severity defaulted false", func(lr plog.LogRecord) { lr.Attributes().PutBool(WireSeverityDefaulted, false) }, "not bool true"},
		{"capture defaulted but redacted", func(lr plog.LogRecord) {
			lr.Attributes().PutBool(WireCaptureDefaulted, true)
			lr.Attributes().PutStr(AttrCapture, "redacted")
		}, "not the materialized default"},
		{"severity number out of range", func(lr plog.LogRecord) { lr.SetSeverityNumber(30) }, "outside 1–24"},
		{"flags beyond a byte", func(lr plog.LogRecord) { lr.SetFlags(0x101) }, "trace-flags byte"},
		{"bad traceparent version", func(lr plog.LogRecord) { lr.Attributes().PutStr(WireTraceparentVersion, "0") }, "two lowercase hex digits"},
		{"string body", func(lr plog.LogRecord) { lr.Body().SetStr("hello") }, "body is Str, not a map"},
		{"bytes in body", func(lr plog.LogRecord) { lr.Body().Map().PutEmptyBytes("blob").FromRaw([]byte{1}) }, "Bytes value has no JSON form"},
		{"NaN in body", func(lr plog.LogRecord) { lr.Body().Map().PutDouble("score", math.NaN()) }, "is not a JSON number"},
		{"body key also a gen_ai attribute", func(lr plog.LogRecord) {
			lr.Body().Map().PutInt("gen_ai.usage.input_tokens", 1)
		}, "also an attribute"},
		{"data marked empty but carried", func(lr plog.LogRecord) { lr.Attributes().PutStr(WireData, WireDataEmpty) }, "but the record carries data"},
		{"unknown data marker", func(lr plog.LogRecord) { lr.Attributes().PutStr(WireData, "lost") }, `"lost" is neither`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lr, res := project(t, baseEvent(t), Options{})
			tc.mutate(lr)
			ev, err := FromLogRecord(lr, res)
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrNotAEP, "a dev.aep. record is AEP, even when malformed")
			assert.ErrorContains(t, err, tc.wantErr)
			assert.Contains(t, err.Error(), lr.EventName()+" record", "the error names the record")
			assert.Nil(t, ev)
		})
	}
}

// TestFromLogRecordInto: rebuilding into an event the caller reuses gives
// what FromLogRecord gives, keeping nothing of the event it held, and a
// record that fails leaves the event as it was.
func TestFromLogRecordInto(t *testing.T) {
	golden := goldenEvents(t)
	var ev aep.Event
	for i, want := range golden {
		t.Run(fmt.Sprintf("line%02d", i), func(t *testing.T) {
			lr, res := project(t, want, Options{})
			fresh, err := FromLogRecord(lr, res)
			require.NoError(t, err)
			require.NoError(t, FromLogRecordInto(lr, &ev)) // ev holds the previous line's event
			assert.Equal(t, *fresh, ev)
		})
	}
	t.Run("rejected", func(t *testing.T) {
		before := ev
		lr, _ := project(t, baseEvent(t), Options{})
		lr.Attributes().Remove(AttrEventID)
		require.ErrorContains(t, FromLogRecordInto(lr, &ev), "aep.event_id is missing")
		assert.Equal(t, before, ev)
	})
}

func removeAttr(key string) func(plog.LogRecord) {
	return func(lr plog.LogRecord) { lr.Attributes().Remove(key) }
}

// TestFromLogRecordForeign inverts a record written by another exporter (the
// reference to_otlp): no lossless extras, other attributes beside AEP's.
func TestFromLogRecordForeign(t *testing.T) {
	lr := plog.NewLogRecord()
	lr.SetEventName("dev.aep.tool.denied")
	lr.SetTimestamp(1783073712500000000)
	lr.SetSeverityText("WARN")
	lr.SetSeverityNumber(plog.SeverityNumberWarn)
	attrs := lr.Attributes()
	attrs.PutStr(AttrAgentID, "claude-code")
	attrs.PutStr(AttrEventID, "01JX9YBJDNY00000000000GOLD")
	attrs.PutStr(AttrCapture, "metadata")
	attrs.PutStr(AttrSource, "aep://host-a/agent/claude-code/session/s_8f2c")
	attrs.PutStr(AttrSessionID, "s_8f2c")
	attrs.PutInt(AttrSequence, 11)
	attrs.PutStr("k8s.pod.name", "collector-0")
	attrs.PutStr("aep.future_attribute", "ignored")
	res := pcommon.NewResource()
	SetResource(res, "shared-relay")

	ev, err := FromLogRecord(lr, res)
	require.NoError(t, err)
	got, err := aep.Canonical(ev)
	require.NoError(t, err)
	assert.JSONEq(t, `{"aep":"0.1","id":"01JX9YBJDNY00000000000GOLD","type":"tool.denied",
		"time":"2026-07-03T10:15:12.500Z","source":"aep://host-a/agent/claude-code/session/s_8f2c",
		"agent":"claude-code","session":"s_8f2c","seq":11,"severity":"warning","capture":"metadata"}`, string(got))
}

func TestSeverityInverseBucketing(t *testing.T) {
	want := map[aep.Severity][]plog.SeverityNumber{
		aep.SeverityDebug:    {1, 2, 3, 4, 5, 6, 7, 8},
		aep.SeverityInfo:     {9},
		aep.SeverityNotice:   {10, 11, 12},
		aep.SeverityWarning:  {13, 14, 15, 16},
		aep.SeverityError:    {17, 18, 19, 20},
		aep.SeverityCritical: {21, 22, 23, 24},
	}
	for sev, numbers := range want {
		for _, n := range numbers {
			t.Run(fmt.Sprintf("number %d", n), func(t *testing.T) {
				lr, res := project(t, baseEvent(t), Options{})
				lr.SetSeverityNumber(n)
				lr.SetSeverityText("ignored when a number is set")
				ev, err := FromLogRecord(lr, res)
				require.NoError(t, err)
				assert.Equal(t, sev, ev.Severity)
			})
		}
	}
	for _, tc := range []struct {
		text string
		want aep.Severity
	}{{"INFO2", aep.SeverityNotice}, {"FATAL", aep.SeverityCritical}, {"", ""}, {"Loud", ""}} {
		t.Run(fmt.Sprintf("no number, text %q", tc.text), func(t *testing.T) {
			lr, res := project(t, baseEvent(t), Options{})
			lr.SetSeverityNumber(plog.SeverityNumberUnspecified)
			lr.SetSeverityText(tc.text)
			ev, err := FromLogRecord(lr, res)
			require.NoError(t, err)
			assert.Equal(t, tc.want, ev.Severity)
		})
	}
}

func TestToLogRecordRejects(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*aep.Event)
		opts    Options
		wantErr string
	}{
		{name: "no aep version", mutate: func(e *aep.Event) { e.AEP = "" }, wantErr: `required attribute "aep" is absent`},
		{name: "no id", mutate: func(e *aep.Event) { e.ID = "" }, wantErr: `required attribute "id" is absent`},
		{name: "no agent", mutate: func(e *aep.Event) { e.Agent = "" }, wantErr: `required attribute "agent" is absent`},
		{name: "time without zone", mutate: func(e *aep.Event) { e.Time = "2026-07-03T10:15:04" }, wantErr: "is not RFC 3339"},
		{name: "time before the Unix epoch", mutate: func(e *aep.Event) { e.Time = "1969-12-31T23:59:59Z" }, wantErr: "outside the OTLP timestamp range"},
		{name: "time past uint64 nanoseconds", mutate: func(e *aep.Event) { e.Time = "2600-01-01T00:00:00Z" }, wantErr: "outside the OTLP timestamp range"},
		{name: "uppercase traceparent", mutate: func(e *aep.Event) {
			e.Traceparent = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"
		}, wantErr: "does not match"},
		{name: "short traceparent", mutate: func(e *aep.Event) { e.Traceparent = "00-4bf92f35-00f067aa0ba902b7-01" }, wantErr: "does not match"},
		{name: "unknown severity", mutate: func(e *aep.Event) { e.Severity = "fatal" }, wantErr: `severity "fatal"`},
		{name: "unknown capture", mutate: func(e *aep.Event) { e.Capture = "all" }, wantErr: `capture "all"`},
		{name: "unknown max capture", mutate: func(*aep.Event) {}, opts: Options{MaxCapture: "most"}, wantErr: `max capture "most"`},
		{name: "extension with a core name", mutate: func(e *aep.Event) { e.Extensions = map[string]any{"seq": "1"} }, wantErr: "collides with a core attribute"},
		{name: "non-scalar extension", mutate: func(e *aep.Event) { e.Extensions = map[string]any{"acme": []any{}} }, wantErr: "is not a string, integer or boolean"},
		{name: "data value of a foreign Go type", mutate: func(e *aep.Event) {
			e.Data = map[string]any{"tool": map[string]any{"args": []string{"ls"}}}
		}, wantErr: `data "tool": "args": value of type []string`},
		{name: "NaN in data", mutate: func(e *aep.Event) { e.Data = map[string]any{"gen_ai.score": math.NaN()} }, wantErr: "NaN is not a JSON number"},
		{name: "number beyond float64", mutate: func(e *aep.Event) { e.Data = map[string]any{"x": []any{json.Number("1e400")}} }, wantErr: `data "x": [0]: number 1e400`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := baseEvent(t)
			tc.mutate(ev)
			err := ToLogRecord(ev, plog.NewLogRecord(), tc.opts)
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.wantErr)
			assert.ErrorContains(t, err, `of type "tool.completed"`, "the error names the event")
		})
	}
}

// TestToLogRecordReusesRecord checks that a recycled record keeps nothing of
// its previous event.
func TestToLogRecordReusesRecord(t *testing.T) {
	events := goldenEvents(t)
	lr := plog.NewLogRecord()
	lr.SetObservedTimestamp(42)
	require.NoError(t, ToLogRecord(events[3], lr, Options{}))  // traceparent, body, gen_ai
	require.NoError(t, ToLogRecord(events[25], lr, Options{})) // minimal, no data
	fresh := plog.NewLogRecord()
	require.NoError(t, ToLogRecord(events[25], fresh, Options{}))
	assert.Equal(t, simplify(fresh, pcommon.NewResource()), simplify(lr, pcommon.NewResource()))
	assert.Equal(t, wireKeys(fresh), wireKeys(lr))
	assert.Equal(t, pcommon.Timestamp(42), lr.ObservedTimestamp(), "ObservedTimestamp is the caller's")
}

func BenchmarkToLogRecord(b *testing.B) {
	ev := baseEvent(b)
	lr := plog.NewLogRecord()
	b.ReportAllocs()
	for b.Loop() {
		if err := ToLogRecord(ev, lr, Options{MaxCapture: aep.CaptureMetadata}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromLogRecord(b *testing.B) {
	lr, res := project(b, baseEvent(b), Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromLogRecord(lr, res); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTimeUnixNano pins to_otlp's time rule: offsets honoured, digits beyond
// the microsecond truncated.
func TestTimeUnixNano(t *testing.T) {
	cases := []struct {
		time string
		want uint64
	}{
		{"2026-07-03T10:15:04.221Z", 1783073704221000000},
		{"2026-07-03T10:15:04Z", 1783073704000000000},
		{"2026-07-03T12:15:04.221+02:00", 1783073704221000000},
		{"2026-07-03T05:45:04.221-04:30", 1783073704221000000},
		{"2026-07-03T10:15:04.2219999Z", 1783073704221999000},
		{"2026-07-03T10:15:04.221999999999Z", 1783073704221999000},
		{"1970-01-01T00:00:00Z", 0},
	}
	for _, tc := range cases {
		t.Run(tc.time, func(t *testing.T) {
			got, err := timeToUnixNano(tc.time)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
