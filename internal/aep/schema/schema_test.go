package schema

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

func TestGoldenValidates(t *testing.T) {
	golden := aeptest.Golden(t)
	require.NotEmpty(t, golden)
	for _, line := range golden {
		t.Run(line.Name(), func(t *testing.T) {
			t.Parallel() // also exercises the lazily compiled schemas concurrently
			require.NoError(t, ValidateJSON(line.Raw))
			require.NoError(t, Validate(line.Event), "the parsed event, in memory")
			doc, err := aep.DecodeValue(line.Raw)
			require.NoError(t, err)
			require.NoError(t, ValidateValue(doc), "the decoded document")
			ev, err := aep.EventOf(doc)
			require.NoError(t, err)
			assert.Equal(t, line.Event, ev, "EventOf reads what Parse reads")
		})
	}
}

// ruleFor maps an invalid case's cited spec rule to the Rule it must fail,
// most specific citation first.
func ruleFor(t *testing.T, cited string) Rule {
	t.Helper()
	return aeptest.RuleCited(t, cited, []aeptest.Citation[Rule]{
		{Cites: "payload schema", Rule: RulePayload},
		{Cites: "field_spec", Rule: RulePayload},
		{Cites: "AEP-0001 §5.4", Rule: RuleExtension},
		{Cites: "AEP-0001 §6", Rule: RuleType},
		{Cites: "AEP-0002 §3", Rule: RuleType},
		{Cites: "AEP-0001 §5.2", Rule: RuleScope},
		{Cites: "AEP-0004 §2.2", Rule: RuleScope},
		{Cites: "AEP-0001 §5.1", Rule: RuleAttribute},
		{Cites: "AEP-0001 §8.1", Rule: RuleAttribute},
	})
}

// TestInvalidSingleEventsFail pins every single-event case of
// invalid/cases.json to the rule it cites. Stream cases are judged in
// package stream, which holds the cross-event rules.
func TestInvalidSingleEventsFail(t *testing.T) {
	for _, tc := range aeptest.Invalid(t) {
		if tc.Event == nil {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			err := ValidateJSON(tc.Event)
			require.Error(t, err)
			var verr *Error
			require.ErrorAs(t, err, &verr)
			assert.Equal(t, ruleFor(t, tc.Rule), verr.Rule, "%v", err)
			assert.NotContains(t, err.Error(), `"aep"`, "an error must not dump the event")
			if doc, derr := aep.DecodeValue(tc.Event); derr == nil {
				assert.Equal(t, err, ValidateValue(doc), "the decoded document gets the same verdict")
			}
		})
	}
}

// event is a valid session-scoped envelope to vary in tests.
const event = `"aep":"0.1","id":"E1","time":"2026-07-03T10:00:00Z","source":"aep://h/agent/a","agent":"a"`

func TestValidateJSON(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		rule Rule // "" for valid
		path string
	}{
		{name: "unregistered member of a registered category validates envelope only",
			raw: `{` + event + `,"type":"progress.some_future_member","session":"s","seq":0,"futureext":"x","data":{"any":1}}`},
		{name: "vendor type has no payload schema",
			raw: `{` + event + `,"type":"x.openhands.message.event","session":"s","seq":0,"data":{"role":[1,2]}}`},
		{name: "reserved registered type without a schema validates envelope only",
			raw: `{` + event + `,"type":"message.user.submitted","session":"s","seq":0,"data":{"text":7}}`},
		{name: "absent data skips a payload with required fields",
			raw: `{` + event + `,"type":"run.failed","session":"s","seq":0,"capture":"none"}`},
		{name: "vendor control command omits seq",
			raw: `{` + event + `,"type":"x.openhands.control.interrupt","session":"s"}`},
		{name: "extension attributes of every scalar kind",
			raw: `{` + event + `,"type":"progress.status","session":"s","seq":0,"acmeregion":"eu-1","acmecount":3,"acmeflag":true}`},
		{name: "not JSON", raw: `{"aep":`, rule: RuleSyntax},
		{name: "trailing bytes after the event", raw: `{` + event + `,"type":"progress.status","session":"s","seq":0}]`, rule: RuleSyntax},
		{name: "an array is not an event", raw: `[]`, rule: RuleSyntax},
		{name: "missing id", raw: `{"aep":"0.1","type":"progress.status","time":"2026-07-03T10:00:00Z","source":"aep://h/agent/a","agent":"a","session":"s","seq":0}`,
			rule: RuleAttribute, path: "/id"},
		{name: "time without a zone", raw: `{"aep":"0.1","id":"E1","type":"agent.idle","time":"2026-07-03T10:00:00","source":"aep://h/agent/a","agent":"a"}`,
			rule: RuleAttribute, path: "/time"},
		{name: "relative source", raw: `{"aep":"0.1","id":"E1","type":"agent.idle","time":"2026-07-03T10:00:00Z","source":"h/agent/a","agent":"a"}`,
			rule: RuleAttribute, path: "/source"},
		{name: "null optional attribute", raw: `{` + event + `,"type":"progress.status","session":"s","seq":0,"run":null}`,
			rule: RuleAttribute, path: "/run"},
		{name: "float seq", raw: `{` + event + `,"type":"progress.status","session":"s","seq":1.5}`,
			rule: RuleAttribute, path: "/seq"},
		{name: "data not an object", raw: `{` + event + `,"type":"progress.status","session":"s","seq":0,"data":[]}`,
			rule: RuleAttribute, path: "/data"},
		{name: "agent-scoped with run", raw: `{` + event + `,"type":"agent.idle","run":"r"}`,
			rule: RuleScope, path: "/run"},
		{name: "command without session", raw: `{` + event + `,"type":"control.pause"}`,
			rule: RuleScope, path: "/session"},
		{name: "extension named like nothing legal", raw: `{` + event + `,"type":"agent.idle","Acme":"v"}`,
			rule: RuleExtension, path: "/Acme"},
		{name: "extension with array value", raw: `{` + event + `,"type":"agent.idle","acmelist":["a"]}`,
			rule: RuleExtension, path: "/acmelist"},
		{name: "payload error names the nested field", raw: `{` + event + `,"type":"tool.failed","session":"s","seq":0,"data":{"tool":{"name":"Bash"},"error":{"type":7}}}`,
			rule: RulePayload, path: "/data/error/type"},
		{name: "payload required field named in the path", raw: `{` + event + `,"type":"tool.completed","session":"s","seq":0,"data":{"status":"success"}}`,
			rule: RulePayload, path: "/data/tool"},
		{name: "expires_at must be a date-time", raw: `{` + event + `,"type":"attention.requested","session":"s","seq":0,"data":{"kind":"input","prompt":"p","expires_at":"tomorrow"}}`,
			rule: RulePayload, path: "/data/expires_at"},
		{name: "fields on a non-form request", raw: `{` + event + `,"type":"attention.requested","session":"s","seq":0,"data":{"kind":"input","prompt":"p","fields":[{"id":"1","type":"number","label":"1"}]}}`,
			rule: RuleForm, path: "/data/fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateJSON([]byte(tt.raw))
			if tt.rule == "" {
				require.NoError(t, err)
				return
			}
			var verr *Error
			require.ErrorAs(t, err, &verr)
			assert.Equal(t, tt.rule, verr.Rule, "%v", err)
			assert.Equal(t, tt.path, verr.Path, "%v", err)
		})
	}
}

func TestValidateRefusesNonScalarExtension(t *testing.T) {
	ev := &aep.Event{AEP: aep.Version, ID: "E1", Type: "agent.idle", Time: "2026-07-03T10:00:00Z",
		Source: "aep://h/agent/a", Agent: "a", Extensions: map[string]any{"acmemeta": map[string]any{"k": 1}}}
	err := Validate(ev)
	var verr *Error
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, RuleExtension, verr.Rule)

	var nilEvent *aep.Event
	require.ErrorAs(t, Validate(nilEvent), &verr)
}

func TestErrorNeverDumpsLargeValues(t *testing.T) {
	huge := strings.Repeat("A", 10_000)
	err := ValidateJSON([]byte(`{` + event + `,"type":"progress.status","session":"s","seq":0,"traceparent":"` + huge + `"}`))
	var verr *Error
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, RuleAttribute, verr.Rule)
	assert.Equal(t, "/traceparent", verr.Path)
	assert.Less(t, len(err.Error()), 400, "%v", err)
}

// goldenToolCompleted is the golden stream's first tool.completed event:
// the tests and benchmarks that want a payload-rich event use it.
func goldenToolCompleted(tb testing.TB) aeptest.GoldenLine {
	tb.Helper()
	for _, l := range aeptest.Golden(tb) {
		if l.Event.Type == "tool.completed" {
			return l
		}
	}
	tb.Fatal("golden has no tool.completed event")
	return aeptest.GoldenLine{}
}

func BenchmarkValidate(b *testing.B) {
	line := goldenToolCompleted(b)
	require.NoError(b, ValidateJSON(line.Raw)) // compile outside the timer

	b.Run("ValidateJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ValidateJSON(line.Raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := Validate(line.Event); err != nil {
				b.Fatal(err)
			}
		}
	})
}
