package stream

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

func TestGoldenStreamPasses(t *testing.T) {
	c := &Checker{}
	for _, line := range aeptest.Golden(t) {
		require.NoError(t, c.Add(line.Event), "golden line %s", line.Name())
	}
}

// TestGoldenStreamRedeliveredPasses replays the golden stream after itself:
// every event is a byte-identical redelivery, which consumers dedupe.
func TestGoldenStreamRedeliveredPasses(t *testing.T) {
	golden := aeptest.Golden(t)
	c := &Checker{}
	for range 2 {
		for _, line := range golden {
			require.NoError(t, c.Add(line.Event), "golden line %s", line.Name())
		}
	}
}

// streamRuleFor maps a stream case's cited spec rule to the error it must
// produce, most specific citation first.
func streamRuleFor(t *testing.T, cited string) error {
	t.Helper()
	return aeptest.RuleCited(t, cited, []aeptest.Citation[error]{
		{Cites: "values rule", Rule: ErrFormValues},
		{Cites: "terminal", Rule: ErrLifecycle},
		{Cites: "§7.4", Rule: ErrIDCollision},
		{Cites: "AEP-0001 §7.2", Rule: ErrOrdering},
		{Cites: "AEP-0004 §3", Rule: ErrAckExclusivity},
	})
}

// TestInvalidStreamsFail pins every stream case of invalid/cases.json: each
// event is schema-validated and fed to one Checker, and the first failure
// must be the rule the case cites. Single-event cases are pinned in package
// schema.
func TestInvalidStreamsFail(t *testing.T) {
	for _, tc := range aeptest.Invalid(t) {
		if tc.Events == nil {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			c := &Checker{}
			var failure error
			for i, raw := range tc.Events {
				if failure = schema.ValidateJSON(raw); failure != nil {
					break
				}
				ev, err := aep.Parse(raw)
				require.NoError(t, err, "event %d", i)
				if failure = c.Add(ev); failure != nil {
					break
				}
			}
			require.Error(t, failure, "the stream must break %s", tc.Rule)
			require.ErrorIs(t, failure, streamRuleFor(t, tc.Rule))
		})
	}
}
