package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

// The tests in this file hold the native payload checks to the schema
// library: they never pass a payload the library fails, and they pass
// every valid payload of the golden stream and of each schema's own
// instances (else the library would walk them after all).

func TestEveryPayloadSchemaIsCheckedNatively(t *testing.T) {
	v := testValidator(t)
	require.NotEmpty(t, v.payloads)
	for typ, p := range v.payloads {
		assert.NotNil(t, p.check, "%s: its payload schema uses a keyword payloadCheck does not know", typ)
	}
}

// replacementTexts are the values each member and item of a payload is
// replaced with, as JSON text: every JSON type, and numbers and strings
// at the edges of the keywords the schemas use.
var replacementTexts = []string{`null`, `true`, `""`, `"s"`, `"2026-12-01T10:15:04Z"`, `"2026-13-01T10:15:04Z"`,
	`0`, `-0`, `7`, `-1`, `1.5`, `-1.5`, `1.0`, `-1.0`, `0.5`, `1e2`, `-1e2`, `1e-2`, `1e400`, `2`, `10`, `100`, `101`,
	`123456789012345678901234567890`, `-123456789012345678901234567890`, `[]`, `["s"]`, `[7]`, `[{}]`, `{}`,
	`{"name":"s"}`, `"select"`, `"form"`}

func decodedValues(tb testing.TB, texts []string) []any {
	tb.Helper()
	out := make([]any, len(texts))
	for i, text := range texts {
		v, err := aep.DecodeValue([]byte(text))
		require.NoError(tb, err, text)
		out[i] = v
	}
	return out
}

// instanceOf builds a value its schema describes: every property when
// full, else only the required ones. It need not be valid (a conditional
// may fail it); the library's verdict is the reference either way.
func instanceOf(s *jsonschema.Schema, full bool) any {
	switch {
	case s.Const != nil:
		return *s.Const
	case s.Enum != nil:
		return s.Enum.Values[0]
	}
	typ := "object"
	if s.Types != nil && !s.Types.IsEmpty() {
		typ = s.Types.ToStrings()[0]
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		for name, p := range s.Properties {
			if full || slices.Contains(s.Required, name) {
				obj[name] = instanceOf(p, full)
			}
		}
		for _, name := range s.Required {
			if _, ok := obj[name]; !ok {
				obj[name] = "s"
			}
		}
		return obj
	case "array":
		if s.Items2020 == nil {
			return []any{}
		}
		return []any{instanceOf(s.Items2020, full)}
	case "string":
		if s.Format != nil {
			return "2026-12-01T10:15:04Z"
		}
		return "s"
	case "integer", "number":
		if s.Minimum != nil {
			return json.Number(s.Minimum.RatString())
		}
		return json.Number("3")
	case "boolean":
		return true
	}
	return nil
}

// mutants are v with one member or item replaced by each replacement,
// removed, or added, at every depth, and v itself replaced.
func mutants(v any, replacements []any) []any {
	out := slices.Clone(replacements)
	switch x := v.(type) {
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(x)) {
			for _, m := range mutants(x[name], replacements) {
				c := maps.Clone(x)
				c[name] = m
				out = append(out, c)
			}
			c := maps.Clone(x)
			delete(c, name)
			out = append(out, c)
		}
		c := maps.Clone(x)
		c["unknown"] = "u"
		out = append(out, c)
	case []any:
		for i := range x {
			for _, m := range mutants(x[i], replacements) {
				c := slices.Clone(x)
				c[i] = m
				out = append(out, c)
			}
		}
		out = append(out, slices.Concat(x, x))
	}
	return out
}

func TestPayloadCheckNeverPassesWhatTheLibraryFails(t *testing.T) {
	v := testValidator(t)
	replacements := decodedValues(t, replacementTexts)
	seeds := map[string][]any{}
	for typ, p := range v.payloads {
		seeds[typ] = []any{instanceOf(p.library, true), instanceOf(p.library, false)}
	}
	for _, line := range aeptest.Golden(t) {
		doc, err := aep.DecodeValue(line.Raw)
		require.NoError(t, err)
		if typ, data, ok := payloadOf(doc.(map[string]any)); ok {
			seeds[typ] = append(seeds[typ], data)
		}
	}

	var judged, validSeeds, libraryPasses, nativePasses int
	for _, typ := range slices.Sorted(maps.Keys(v.payloads)) {
		p := v.payloads[typ]
		require.NotNil(t, p.check, typ)
		for i, seed := range seeds[typ] {
			if p.library.Validate(seed) == nil {
				validSeeds++
				assert.True(t, p.check.passes(seed), "%s seed %d: a valid payload the native check leaves to the library: %s", typ, i, text(seed))
			}
			for _, m := range mutants(seed, replacements) {
				judged++
				library, native := p.library.Validate(m) == nil, p.check.passes(m)
				if library {
					libraryPasses++
				}
				if native {
					nativePasses++
				}
				if native && !library {
					t.Errorf("%s seed %d: the native check passes a payload the library fails: %s", typ, i, text(m))
				}
			}
		}
	}
	t.Logf("%d valid seeds; %d mutants: the library passes %d, the native check %d", validSeeds, judged, libraryPasses, nativePasses)
	assert.Greater(t, validSeeds, 80, "every type has a valid instance")
	assert.Greater(t, judged-libraryPasses, judged/2, "most mutants are invalid")
	assert.Greater(t, nativePasses, libraryPasses*9/10, "the native check passes nearly every valid mutant")
}

func FuzzPayloadCheckNeverPassesWhatTheLibraryFails(f *testing.F) {
	v := testValidator(f)
	types := slices.Sorted(maps.Keys(v.payloads))
	for i, typ := range types {
		raw, err := json.Marshal(instanceOf(v.payloads[typ].library, true))
		require.NoError(f, err)
		f.Add(uint8(i), raw)
	}
	f.Fuzz(func(t *testing.T, typ uint8, raw []byte) {
		data, err := aep.DecodeValue(raw)
		if err != nil {
			return
		}
		p := v.payloads[types[int(typ)%len(types)]]
		if p.check.passes(data) && p.library.Validate(data) != nil {
			t.Errorf("%s: the native check passes a payload the library fails: %s", types[int(typ)%len(types)], raw)
		}
	})
}

func text(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

func BenchmarkCheckPayload(b *testing.B) {
	v := testValidator(b)
	ev := goldenToolCompleted(b).Event
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := v.checkPayload(ev.Type, ev.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("schema walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := v.checkPayloadBySchema(ev.Type, ev.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
