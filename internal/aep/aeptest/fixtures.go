// Package aeptest loads the AEP 0.1 conformance fixtures
// (testdata/aep/fixtures) for tests, so every package reads them the same
// way.
package aeptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// FixturesDir returns the absolute path of testdata/aep/fixtures, found
// from this file's location so that it works from any package directory.
func FixturesDir(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("aeptest: cannot locate the fixtures directory")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "aep", "fixtures")
}

func read(tb testing.TB, rel string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(FixturesDir(tb), rel))
	if err != nil {
		tb.Fatalf("aeptest: read fixture: %v", err)
	}
	return raw
}

// GoldenLine is one event of golden/golden.jsonl.
type GoldenLine struct {
	Index int
	Raw   []byte
	Event *aep.Event
}

// Name is the subtest name of a golden line: its index and type.
func (g GoldenLine) Name() string { return fmt.Sprintf("%02d_%s", g.Index, g.Event.Type) }

// Golden returns the golden stream in file order.
func Golden(tb testing.TB) []GoldenLine {
	tb.Helper()
	var lines []GoldenLine
	for i, raw := range bytes.Split(read(tb, "golden/golden.jsonl"), []byte("\n")) {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		ev, err := aep.Parse(raw)
		if err != nil {
			tb.Fatalf("aeptest: golden line %d: %v", i, err)
		}
		lines = append(lines, GoldenLine{Index: i, Raw: raw, Event: ev})
	}
	return lines
}

// InvalidCase is one case of invalid/cases.json: a single Event, or a
// stream of Events judged together.
type InvalidCase struct {
	Name   string            `json:"name"`
	Rule   string            `json:"rule"`
	Event  json.RawMessage   `json:"event"`
	Events []json.RawMessage `json:"events"`
}

// Citation pairs a spec citation with the rule a case citing it must
// fail.
type Citation[R any] struct {
	Cites string
	Rule  R
}

// RuleCited is the rule of the first citation (most specific first) that
// an invalid case's cited rule contains; a citation none matches fails tb.
func RuleCited[R any](tb testing.TB, cited string, citations []Citation[R]) R {
	tb.Helper()
	for _, c := range citations {
		if strings.Contains(cited, c.Cites) {
			return c.Rule
		}
	}
	tb.Fatalf("no rule maps the cited rule %q; extend the citations", cited)
	var none R
	return none
}

// Invalid returns the cases of invalid/cases.json in file order.
func Invalid(tb testing.TB) []InvalidCase {
	tb.Helper()
	var file struct {
		Cases []InvalidCase `json:"cases"`
	}
	if err := json.Unmarshal(read(tb, "invalid/cases.json"), &file); err != nil {
		tb.Fatalf("aeptest: parse invalid/cases.json: %v", err)
	}
	if len(file.Cases) == 0 {
		tb.Fatal("aeptest: invalid/cases.json has no cases")
	}
	return file.Cases
}
