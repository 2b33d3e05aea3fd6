package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schemas"
)

// The tests in this file prove the native envelope checks equivalent to
// the schema library's walk of aep-event.schema.json: same verdict, same
// Rule and, where the walk itself is deterministic, same Path.

func testValidator(tb testing.TB) *validator {
	tb.Helper()
	v, err := compiled()
	require.NoError(tb, err)
	return v
}

// bySchemaJSON is ValidateJSON as it was: decode, then the schema walk.
func (v *validator) bySchemaJSON(raw []byte) error {
	doc, err := decodeEvent(raw)
	if err != nil {
		return err
	}
	return v.validateBySchema(doc)
}

// bySchemaEvent is Validate as it was: marshal, then ValidateJSON by the
// schema walk.
func (v *validator) bySchemaEvent(ev *aep.Event) error {
	raw, err := ev.MarshalJSON()
	if err != nil {
		if errors.Is(err, aep.ErrExtension) {
			return &Error{Rule: RuleExtension, Reason: err.Error()}
		}
		return fmt.Errorf("marshal: %w", err)
	}
	return v.bySchemaJSON(raw)
}

// verdictDiff describes how two results differ, "" when they agree.
// Paths are compared unless the walk's own choice is not deterministic:
// it picks among several ill-formed extension names in map order.
func verdictDiff(native, reference error, ambiguousPath bool) string {
	var n, r *Error
	nIsError, rIsError := errors.As(native, &n), errors.As(reference, &r)
	switch {
	case native == nil && reference == nil:
		return ""
	case native == nil || reference == nil || nIsError != rIsError:
		return fmt.Sprintf("native %v, schema walk %v", native, reference)
	case !nIsError:
		return "" // both failed outside validation (marshalling)
	case n.Rule != r.Rule || (n.Path != r.Path && !ambiguousPath):
		return fmt.Sprintf("native %v, schema walk %v", native, reference)
	}
	return ""
}

// member is one top-level member of a generated event, its value as JSON
// text.
type member struct{ name, value string }

// eventText is an event as an ordered list of members, so that a case can
// carry bytes no encoder writes (invalid UTF-8, duplicate names).
type eventText []member

func membersOf(tb testing.TB, raw []byte) eventText {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	_, err := dec.Token()
	require.NoError(tb, err)
	var out eventText
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(tb, err)
		var val json.RawMessage
		require.NoError(tb, dec.Decode(&val))
		out = append(out, member{name: tok.(string), value: string(val)})
	}
	return out
}

func (e eventText) raw() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range e {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonText(m.name))
		b.WriteByte(':')
		b.WriteString(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// with sets name to value, where it is or at the end.
func (e eventText) with(name, value string) eventText {
	out := slices.Clone(e)
	if i := slices.IndexFunc(out, func(m member) bool { return m.name == name }); i >= 0 {
		out[i].value = value
		return out
	}
	return append(out, member{name, value})
}

func (e eventText) without(name string) eventText {
	return slices.DeleteFunc(slices.Clone(e), func(m member) bool { return m.name == name })
}

// jsonText quotes s as a JSON string byte for byte: invalid UTF-8 stays.
func jsonText(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func jsonTexts(ss ...string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = jsonText(s)
	}
	return out
}

// mutation changes one generated event.
type mutation struct {
	name  string
	apply func(eventText) eventText
}

func setTo(name, value string) mutation {
	return mutation{name: name + "=" + value, apply: func(e eventText) eventText { return e.with(name, value) }}
}

func removed(name string) mutation {
	return mutation{name: "no " + name, apply: func(e eventText) eventText { return e.without(name) }}
}

// Values each member is tried with, as JSON text.
var (
	anyJSONType = []string{`null`, `true`, `false`, `0`, `-1`, `1.5`, `1e2`, `""`, `"x"`, `[]`, `["a"]`, `{}`, `{"a":1}`, `"0.1"`}

	stringValues = append(jsonTexts("a", "日本", "\xff", "\x00", " ", "a\nb", strings.Repeat("z", 300)), `"\ud800"`)

	eventTypes = append(registeredTypes(), []string{
		"agent", "agent.", "agent.x", "agent.X", "agent..x", "agent.x.", "agent.idle\n", "Agent.idle", "agentx.idle",
		"x.a.b", "x.a.b.c", "x.A.b.c", "x.a-b.c.d", "x..b.c", "x.a.b-c.d", "x._.a.b", "x.-.a.b", "x.a.b.c.d.e",
		"x.a.control.x", "x.a.control.", "x.a.control", "x.a.control.\n", "x.a.control.x\ny", "x.a.control.é", "x.a.control.\xff",
		"x.a b.control.x", "x.a.controls.x", "x.openhands.control.interrupt", "x.openhands.message.event",
		"control.pause.x", "control.pause\n", "control.attention", "attention.routed.x", "attention.routed",
		"foo.bar", "progress.some_future_member", "message.user.submitted", "tool.completed\n", "tool.Completed",
		"tool.completed.", "tool..completed", "tool.com-pleted", "", ".", "x", "x.", "é.x", "tool.é",
	}...)

	dateTimes = jsonTexts(
		"2026-07-03T10:15:04.221Z", "2026-07-03T10:15:04Z", "2026-07-03t10:15:04z", "2026-07-03 10:15:04Z",
		"2026-07-03T10:15:04", "2026-07-03T10:15:04+02:00", "2026-07-03T10:15:04-0200", "2026-07-03T10:15:04.Z",
		"1990-12-31T23:59:60Z", "1990-12-31T15:59:60-08:00", "1990-12-31T23:59:60+01:00", "2026-02-29T00:00:00Z",
		"2024-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-07-03T24:00:00Z", "+1:00:00Z", "tomorrow", "",
		"2026-07-03T+1:-0:+5Z", "2026-07-03T10:15:04+24:00", "2026-07-03T10:15:04.221Z\n",
	)

	uris = jsonTexts(
		"aep://h/agent/a", "h/agent/a", "", "http://[::1]/", "http://[::1", "http://::1/", "http://[fe80::1%25en0]/",
		"mailto:x", "a:b", ":x", "1a:b", "http://h:port/", "http://h:80/", "http://h/%zz", "aep://h/\xff", " aep://h",
		"aep://h /x", "aep:// h", "\x01aep://h", "urn:x", "x:", "http://a b/", "aep://h/日本", "HTTP://H/", "a+b-c.d:x",
		"aep://user@h:1/p?q#f", "aep://h/p#%", "//h/p", "aep:", "http://[1.2.3.4]/", "http://[::1]:x/",
	)

	integers = []string{`0`, `1`, `-1`, `-0`, `1.0`, `-1.0`, `1.5`, `1e2`, `1E+2`, `-1e-1`, `1e400`, `1e1000001`,
		`0.0`, `-0.0`, `10e-1`, `9223372036854775808`, `-9223372036854775809`, `123456789012345678901234567890`,
		`0e5`, `-0e-5`, `2.50e1`, `1e-1000001`, `"1"`, `null`, `true`, `[]`, `{}`}

	traceparents = jsonTexts(
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "",
	)

	severities = jsonTexts("debug", "info", "notice", "warning", "error", "critical", "INFO", "fatal", "", "info ")
	captures   = jsonTexts("none", "metadata", "redacted", "full", "None", "partial", "")
	payloads   = []string{`{}`, `{"tool":{"name":"Bash"}}`, `{"tool":{"name":7}}`, `{"kind":"input","prompt":"p","fields":[]}`}

	extensionNamesTried = []string{"a", "acme", "abcdefghijklmnopqrst", "abcdefghijklmnopqrstu", "A", "a-b", "a_b", "",
		"é", "a b", "a/b", "a~b", "0", "x1", "\xff", "a\n"}
	extensionValuesTried = []string{`"s"`, `""`, `1`, `-1`, `1.5`, `1.0`, `1e2`, `1e400`, `1e1000001`, `true`, `false`,
		`null`, `[]`, `{}`, `["a"]`}
)

func registeredTypes() []string {
	raw, err := schemas.FS.ReadFile(typesRegistryPath)
	if err != nil {
		panic(err) // the embedded registry is part of the build
	}
	var reg typesRegistry
	if err := json.Unmarshal(raw, &reg); err != nil {
		panic(err)
	}
	var out []string
	for _, t := range reg.Types {
		out = append(out, t.Type)
	}
	return out
}

// mutations is the pool every generated case draws from.
func mutations() []mutation {
	var out []mutation
	for _, a := range attributeNames {
		out = append(out, removed(a))
		for _, val := range anyJSONType {
			out = append(out, setTo(a, val))
		}
	}
	for _, a := range []string{"id", "subject", "agent", "session", "run", "step", "cause"} {
		for _, val := range stringValues {
			out = append(out, setTo(a, val))
		}
	}
	for _, typ := range eventTypes {
		out = append(out, setTo("type", jsonText(typ)))
	}
	for _, val := range append(jsonTexts("0.1", "0.2", "0.10", " 0.1", "0.1\n"), `0.1`) {
		out = append(out, setTo("aep", val))
	}
	for _, set := range []struct {
		name   string
		values []string
	}{
		{"time", dateTimes}, {"source", uris}, {"seq", integers}, {"epoch", integers},
		{"traceparent", traceparents}, {"severity", severities}, {"capture", captures}, {"data", payloads},
	} {
		for _, val := range set.values {
			out = append(out, setTo(set.name, val))
		}
	}
	for _, name := range extensionNamesTried {
		for _, val := range extensionValuesTried {
			out = append(out, setTo(name, val))
		}
	}
	out = append(out, mutation{name: "duplicate type, last wins", apply: func(e eventText) eventText {
		return append(slices.Clone(e), member{"type", `"agent.idle"`})
	}}, mutation{name: "duplicate seq, last wins", apply: func(e eventText) eventText {
		return append(slices.Clone(e), member{"seq", `-1`})
	}})
	return out
}

// differentialCase is one generated event.
type differentialCase struct {
	name string
	raw  []byte
}

// differentialCases are the golden lines, the single-event invalid
// fixtures and mutations of the golden lines: every mutation of three
// lines (one per scope class), a sample of single and combined mutations
// of every line, and every type against every presence of the scope
// members.
func differentialCases(tb testing.TB) []differentialCase {
	tb.Helper()
	rng := rand.New(rand.NewPCG(2026, 703))
	pool := mutations()
	var cases []differentialCase
	add := func(name string, e eventText) { cases = append(cases, differentialCase{name, e.raw()}) }

	golden := aeptest.Golden(tb)
	classes := map[scopeClass]eventText{}
	for _, line := range golden {
		cases = append(cases, differentialCase{"golden " + line.Name(), line.Raw})
		base := membersOf(tb, line.Raw)
		class := classOf(stringValue(line.Event.Type))
		if _, ok := classes[class]; !ok {
			classes[class] = base
			for _, m := range pool {
				add(line.Name()+" "+m.name, m.apply(base))
			}
		}
		for range 40 {
			m := pool[rng.IntN(len(pool))]
			add(line.Name()+" "+m.name, m.apply(base))
		}
		for range 60 {
			e, names := base, []string{}
			for range 2 + rng.IntN(3) {
				m := pool[rng.IntN(len(pool))]
				e, names = m.apply(e), append(names, m.name)
			}
			add(line.Name()+" "+strings.Join(names, " & "), e)
		}
	}
	require.Len(tb, classes, 3, "the golden stream has events of every scope class")

	for _, tc := range aeptest.Invalid(tb) {
		if tc.Event != nil {
			cases = append(cases, differentialCase{"invalid " + tc.Name, tc.Event})
		}
	}

	scopeMembers := []member{{"session", `"s"`}, {"run", `"r"`}, {"step", `"t"`}, {"seq", `0`}}
	for _, typText := range append(jsonTexts(eventTypes...), `7`, `null`) {
		for present := range 1 << len(scopeMembers) {
			e := classes[agentScopedClass].with("type", typText)
			for i, m := range scopeMembers {
				if present&(1<<i) != 0 {
					e = e.with(m.name, m.value)
				} else {
					e = e.without(m.name)
				}
			}
			add(fmt.Sprintf("type %s scope members %04b", typText, present), e)
		}
	}
	return cases
}

// ambiguousPath reports whether the schema walk names one of several
// failing extension names, chosen in map order.
func (v *validator) ambiguousPath(raw []byte) bool {
	doc, err := decodeEvent(raw)
	if err != nil {
		return false
	}
	bad := 0
	for name := range doc {
		if !v.envelope.PropertyNames.Pattern.MatchString(name) {
			bad++
		}
	}
	return bad > 1
}

func TestNativeValidationMatchesSchemaWalk(t *testing.T) {
	v := testValidator(t)
	cases := differentialCases(t)
	require.Greater(t, len(cases), 10_000)
	t.Logf("%d events", len(cases))

	var events, mismatches int
	byRule := map[Rule]int{}
	mismatch := func(format string, args ...any) {
		t.Errorf(format, args...)
		if mismatches++; mismatches == 20 {
			t.Fatal("stopping after 20 mismatches")
		}
	}
	for _, tc := range cases {
		native, reference := v.validateJSON(tc.raw), v.bySchemaJSON(tc.raw)
		if verr := (*Error)(nil); errors.As(reference, &verr) {
			byRule[verr.Rule]++
		}
		if diff := verdictDiff(native, reference, v.ambiguousPath(tc.raw)); diff != "" {
			mismatch("%s: ValidateJSON: %s", tc.name, diff)
		}
		ev, err := aep.Parse(tc.raw)
		if err != nil {
			continue
		}
		events++
		if diff := verdictDiff(v.validateEvent(ev), v.bySchemaEvent(ev), false); diff != "" {
			mismatch("%s: Validate: %s", tc.name, diff)
		}
	}
	t.Logf("failures by rule: %v; %d events parse as aep.Event and were also validated in memory", byRule, events)
	for _, rule := range []Rule{RuleAttribute, RuleType, RuleScope, RuleExtension, RulePayload} {
		assert.Greater(t, byRule[rule], 100, "generated events break the %s rule", rule)
	}
}

// TestValidateEventMatchesItsWireForm pins Validate on events whose wire
// form differs from what they hold in memory.
func TestValidateEventMatchesItsWireForm(t *testing.T) {
	v := testValidator(t)
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	deep := map[string]any{}
	for range 100 {
		deep = map[string]any{"d": deep}
	}
	base := goldenToolCompleted(t).Event

	tests := []struct {
		name   string
		change func(*aep.Event)
	}{
		{"unchanged", func(*aep.Event) {}},
		{"int extension", func(e *aep.Event) { e.Extensions = map[string]any{"acme": 5} }},
		{"int32 extension", func(e *aep.Event) { e.Extensions = map[string]any{"acme": int32(-5)} }},
		{"float extension", func(e *aep.Event) { e.Extensions = map[string]any{"acme": 1.0} }},
		{"slice extension", func(e *aep.Event) { e.Extensions = map[string]any{"acme": []string{"a"}} }},
		{"nil extension", func(e *aep.Event) { e.Extensions = map[string]any{"acme": nil} }},
		{"extension number with a plus", func(e *aep.Event) { e.Extensions = map[string]any{"acme": json.Number("+5")} }},
		{"extension number with a leading zero", func(e *aep.Event) { e.Extensions = map[string]any{"acme": json.Number("007")} }},
		{"extension number -0", func(e *aep.Event) { e.Extensions = map[string]any{"acme": json.Number("-0")} }},
		{"extension fraction", func(e *aep.Event) { e.Extensions = map[string]any{"acme": json.Number("1.0")} }},
		{"extension with a core name", func(e *aep.Event) { e.Extensions = map[string]any{"seq": "1"} }},
		{"two bad extensions, least name refused", func(e *aep.Event) {
			e.Extensions = map[string]any{"Zed": "1", "bad": []any{}, "ok": "x"}
		}},
		{"extension string with invalid UTF-8", func(e *aep.Event) { e.Extensions = map[string]any{"acme": "\xff"} }},
		{"source with invalid UTF-8", func(e *aep.Event) { e.Source = "aep://h/\xff" }},
		{"host with invalid UTF-8", func(e *aep.Event) { e.Source = "aep://\xff/" }},
		{"type with invalid UTF-8", func(e *aep.Event) { e.Type = "tool.\xff" }},
		{"id with invalid UTF-8", func(e *aep.Event) { e.ID = "\xff" }},
		{"negative seq", func(e *aep.Event) { e.Seq = aep.Int64(-1) }},
		{"negative epoch", func(e *aep.Event) { e.Epoch = aep.Int64(-1) }},
		{"no seq", func(e *aep.Event) { e.Seq = nil }},
		{"agent type keeps session", func(e *aep.Event) { e.Type = "agent.idle" }},
		{"empty data", func(e *aep.Event) { e.Data = map[string]any{} }},
		{"no data", func(e *aep.Event) { e.Data = nil }},
		{"data with an int", func(e *aep.Event) { e.Data["duration_ms"] = 5 }},
		{"data with a negative int", func(e *aep.Event) { e.Data["duration_ms"] = -5 }},
		{"data with a float", func(e *aep.Event) { e.Data["duration_ms"] = 1.5 }},
		{"data with a string slice", func(e *aep.Event) { e.Data["tool"] = []string{"a"} }},
		{"data with a nil slice", func(e *aep.Event) { e.Data["result"] = []any(nil) }},
		{"data with a nil map", func(e *aep.Event) { e.Data["tool"] = map[string]any(nil) }},
		{"data with a typed map", func(e *aep.Event) { e.Data["tool"] = map[string]string{"name": "Bash"} }},
		{"data with an empty number", func(e *aep.Event) { e.Data["duration_ms"] = json.Number("") }},
		{"data with a bad number", func(e *aep.Event) { e.Data["duration_ms"] = json.Number("abc") }},
		{"data with invalid UTF-8", func(e *aep.Event) { e.Data["status"] = "\xff" }},
		{"data key with invalid UTF-8", func(e *aep.Event) { e.Data["\xff"] = "x" }},
		{"deep data", func(e *aep.Event) { e.Data["result"] = deep }},
		{"cyclic data", func(e *aep.Event) { e.Data["result"] = cyclic }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := base.Clone()
			tt.change(ev)
			assert.Empty(t, verdictDiff(v.validateEvent(ev), v.bySchemaEvent(ev), false))
		})
	}
}

// matcherCase pairs a native matcher with what it mirrors.
type matcherCase struct {
	name   string
	native func(string) bool
	mirror func(string) bool
}

// matchers pairs each native matcher with what it mirrors.
func matchers(v *validator) []matcherCase {
	pattern := func(sch *jsonschema.Schema) func(string) bool { return sch.Pattern.MatchString }
	env := v.envelope
	return []matcherCase{
		{"type pattern", isEventType, pattern(env.Properties["type"])},
		{"agent-scoped if", func(s string) bool { return strings.HasPrefix(s, "agent.") }, pattern(env.AllOf[0].If.Properties["type"])},
		{"foreign-emitter if", isForeignEmitterType, pattern(env.AllOf[0].Else.If.Properties["type"])},
		{"traceparent pattern", isTraceparent, pattern(env.Properties["traceparent"])},
		{"extension name pattern", isExtensionName, pattern(env.PropertyNames)},
		{"date-time format", func(s string) bool { return dateTimeReason(s) == "" }, func(s string) bool {
			return env.Properties["time"].Format.Validate(s) == nil
		}},
		{"json.Number literal", isJSONNumber, func(s string) bool {
			_, err := json.Marshal(json.Number(s))
			return s != "" && err == nil
		}},
	}
}

func TestMatchersMirrorTheSchema(t *testing.T) {
	inputs := matcherInputs()
	require.Greater(t, len(inputs), 10_000)
	t.Logf("%d strings", len(inputs))
	for _, tt := range matchers(testValidator(t)) {
		t.Run(tt.name, func(t *testing.T) {
			accepted := 0
			for _, s := range inputs {
				want := tt.mirror(s)
				if want {
					accepted++
				}
				if tt.native(s) != want {
					t.Errorf("%q: native %v, mirrored %v", s, !want, want)
				}
			}
			assert.Positive(t, accepted, "the inputs include strings it accepts")
		})
	}
}

func FuzzMatchersMirrorTheSchema(f *testing.F) {
	for _, s := range []string{"2026-07-03T10:15:04.221Z", "1990-12-31T15:59:60-08:00", "x.a.control.b", "tool.completed",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "acme", "-1.5e+3"} {
		f.Add(s)
	}
	tests := matchers(testValidator(f))
	f.Fuzz(func(t *testing.T, s string) {
		for _, tt := range tests {
			if want := tt.mirror(s); tt.native(s) != want {
				t.Errorf("%s: %q: native %v, mirrored %v", tt.name, s, !want, want)
			}
		}
	})
}

func FuzzNativeValidationMatchesSchemaWalk(f *testing.F) {
	for _, line := range aeptest.Golden(f) {
		f.Add(line.Raw)
	}
	v := testValidator(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if diff := verdictDiff(v.validateJSON(raw), v.bySchemaJSON(raw), v.ambiguousPath(raw)); diff != "" {
			t.Errorf("ValidateJSON: %s", diff)
		}
		if ev, err := aep.Parse(raw); err == nil {
			if diff := verdictDiff(v.validateEvent(ev), v.bySchemaEvent(ev), false); diff != "" {
				t.Errorf("Validate: %s", diff)
			}
		}
	})
}

// matcherInputs are strings near the edges of every matcher: dates and
// times over a grid and with every byte varied, types and names built
// from the tokens of the grammar, number literals, traceparents.
func matcherInputs() []string {
	rng := rand.New(rand.NewPCG(703, 2026))
	var out []string
	for _, y := range []string{"0000", "1900", "2000", "2023", "2024", "2100", "2400", "9999"} {
		for month := range 14 {
			for _, d := range []string{"00", "01", "28", "29", "30", "31", "32"} {
				out = append(out, fmt.Sprintf("%s-%02d-%sT12:00:00Z", y, month, d))
			}
		}
	}
	for _, h := range []string{"00", "01", "22", "23", "24", "+1", "-0", "-1", "+0"} {
		for _, m := range []string{"00", "58", "59", "60", "+9", "-0"} {
			for _, s := range []string{"59", "60", "61", "+6", "-0"} {
				for _, off := range []string{"Z", "z", "+00:00", "-00:00", "+01:00", "-01:00", "+23:59", "-23:59",
					"+00:01", "-00:01", "+24:00", "+00:60", "+-1:00", "-+1:00", "+0:00", "+00:0", "+00-00", "", ".5Z", ".Z", ".123-01:00"} {
					out = append(out, "1990-12-31T"+h+":"+m+":"+s+off)
				}
			}
		}
	}
	const alphabet = "0123456789-:+.zZtT x\n\xff"
	for _, valid := range []string{"2026-07-03T10:15:04.221Z", "1990-12-31T15:59:60-08:00"} {
		for i := range len(valid) {
			for j := range len(alphabet) {
				out = append(out, valid[:i]+alphabet[j:j+1]+valid[i+1:])
			}
			out = append(out, valid[:i]+valid[i+1:], valid[:i]+"0"+valid[i:])
		}
	}
	tokens := []string{"agent", "control", "x", "attention", "routed", "pause", "attention.respond", "tool", "run",
		"a", "b_c", "d-e", "A", "", "é", "\xff", "\n", "1", "_", "-"}
	for range 6000 {
		var b strings.Builder
		for i := range 1 + rng.IntN(5) {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tokens[rng.IntN(len(tokens))])
		}
		out = append(out, b.String())
	}
	out = append(out, eventTypes...)
	for range 2000 {
		name := make([]byte, rng.IntN(23))
		for i := range name {
			name[i] = "az09A_-~/\xff"[rng.IntN(10)]
		}
		out = append(out, string(name))
	}
	const hex = "0123456789abcdefABCDEFg-"
	valid := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	out = append(out, valid, valid+"\n", valid[1:])
	for i := range len(valid) {
		for j := range len(hex) {
			out = append(out, valid[:i]+hex[j:j+1]+valid[i+1:])
		}
	}
	for range 2000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteByte("0123456789-+.eE "[rng.IntN(16)])
		}
		out = append(out, b.String())
	}
	return out
}

func TestNumberLiteralMirrorsTheLibrary(t *testing.T) {
	integer, nonNegative := librarySchema(t, `{"type":"integer"}`), librarySchema(t, `{"type":"integer","minimum":0}`)
	for _, lit := range []string{"0", "-0", "7", "-7", "1.0", "-1.0", "1.5", "-1.5", "1e2", "-1e2", "1e-2", "-0.0",
		"0e5", "1e400", "-1e400", "1e1000001", "1e-1000001", "2.50e1", "10e-1", "-10e-1",
		"123456789012345678901234567890", "-123456789012345678901234567890"} {
		t.Run(lit, func(t *testing.T) {
			isInteger, negative := numberLiteral(lit)
			assert.Equal(t, integer.Validate(json.Number(lit)) == nil, isInteger, "integer")
			assert.Equal(t, nonNegative.Validate(json.Number(lit)) == nil, isInteger && !negative, "non-negative integer")
		})
	}
}

// librarySchema compiles a schema document with the schema library.
func librarySchema(tb testing.TB, doc string) *jsonschema.Schema {
	tb.Helper()
	parsed, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	require.NoError(tb, err)
	c := jsonschema.NewCompiler()
	require.NoError(tb, c.AddResource("test.json", parsed))
	sch, err := c.Compile("test.json")
	require.NoError(tb, err)
	return sch
}

func BenchmarkValidateEnvelope(b *testing.B) {
	v := testValidator(b)
	raw := goldenToolCompleted(b).Raw
	doc, err := decodeEvent(raw)
	require.NoError(b, err)
	delete(doc, "data")
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := v.validateDecoded(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("schema walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := v.validateBySchema(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("native in memory", func(b *testing.B) {
		ev, err := aep.Parse(raw)
		require.NoError(b, err)
		ev.Data = nil
		b.ReportAllocs()
		for b.Loop() {
			if err := v.validateEvent(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
