package aeprelaytest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The attr-match cases pin AEP-0003 §6.2 rule by rule.
func TestFilterMatches(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter string
		event  string
		match  bool
	}{
		{"type pattern hits", `{"type":["attention.*"]}`, `{"type":"attention.requested","session":"s1"}`, true},
		{"type pattern needs the dot", `{"type":"attention.*"}`, `{"type":"attentionx.requested"}`, false},
		{"type pattern misses other categories", `{"type":["attention.*"]}`, `{"type":"tool.completed"}`, false},
		{"exact type", `{"type":"tool.completed"}`, `{"type":"tool.completed"}`, true},
		{"vendor pattern", `{"type":["x.acme.*"]}`, `{"type":"x.acme.foo.bar"}`, true},
		{"patterns and exact types mix", `{"type":["tool.completed","run.*"]}`, `{"type":"run.started"}`, true},
		{"severity gte hits declared", `{"severity":{"gte":"notice"}}`, `{"type":"attention.requested","severity":"notice"}`, true},
		{"severity gte misses default info", `{"severity":{"gte":"notice"}}`, `{"type":"tool.completed"}`, false},
		{"severity band includes default", `{"severity":{"gte":"debug","lte":"info"}}`, `{"type":"tool.completed"}`, true},
		{"severity equality uses the default", `{"severity":"info"}`, `{"type":"tool.completed"}`, true},
		{"capture default applies", `{"capture":"metadata"}`, `{"type":"tool.completed"}`, true},
		{"agent inclusion", `{"agent":["claude-code","codex"]}`, `{"type":"run.started","agent":"codex"}`, true},
		{"session equality misses another", `{"session":"s_8f2c"}`, `{"type":"run.started","session":"s_other"}`, false},
		{"epoch default applies", `{"epoch":0}`, `{"type":"run.started","session":"s1"}`, true},
		{"epoch compares integers only", `{"epoch":"0"}`, `{"type":"run.started","session":"s1"}`, false},
		{"absent attribute never matches", `{"step":"turn-3"}`, `{"type":"run.started","session":"s1"}`, false},
		{"extension equality", `{"acmeregion":"eu-1"}`, `{"type":"run.started","acmeregion":"eu-1"}`, true},
		{"extension integer", `{"acmeshard":3}`, `{"type":"run.started","acmeshard":3}`, true},
		{"extension absent", `{"acmeregion":"eu-1"}`, `{"type":"run.started"}`, false},
		{"empty filter matches everything", `{}`, `{"type":"agent.heartbeat"}`, true},
		{"conjunction across keys", `{"type":["tool.*"],"severity":{"gte":"info"},"agent":"codex"}`, `{"type":"tool.failed","severity":"warning","agent":"codex"}`, true},
		{"conjunction fails on one key", `{"type":["tool.*"],"agent":"codex"}`, `{"type":"tool.failed","agent":"claude"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFilterJSON([]byte(tc.filter))
			require.NoError(t, err)
			var ev aep.Event
			require.NoError(t, ev.UnmarshalJSON([]byte(tc.event)))
			assert.Equal(t, tc.match, f.match(&ev))
		})
	}
}

func TestFilterFailsClosed(t *testing.T) {
	for _, tc := range []struct{ name, filter string }{
		{"seq is not filterable", `{"seq":5}`},
		{"data is not filterable", `{"data":{}}`},
		{"time is not filterable", `{"time":"2026"}`},
		{"aep is not filterable", `{"aep":"0.1"}`},
		{"traceparent is not filterable", `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`},
		{"bare star is not a pattern", `{"type":"*"}`},
		{"pattern without a dot", `{"type":"tool*"}`},
		{"illegal key", `{"NotAnAttr":"y"}`},
		{"gt is not a severity operator", `{"severity":{"gt":"info"}}`},
		{"unknown severity level", `{"severity":{"gte":"loud"}}`},
		{"comparison on another key", `{"agent":{"gte":"a"}}`},
		{"glob on a non-type key", `{"agent":"claude*"}`},
		{"empty inclusion array", `{"agent":[]}`},
		{"float value", `{"epoch":1.5}`},
		{"null value", `{"agent":null}`},
		{"nested array", `{"agent":[["a"]]}`},
		{"not an object", `["type"]`},
		{"not JSON", `{type}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFilterJSON([]byte(tc.filter))
			require.ErrorIs(t, err, errInvalidFilter)
		})
	}
}
