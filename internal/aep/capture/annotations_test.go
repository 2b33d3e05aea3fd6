package capture

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schemas"
)

func TestAnnotationsLoadEveryPayloadSchema(t *testing.T) {
	all, err := loadAnnotations()
	require.NoError(t, err)
	files, err := fs.Glob(schemas.FS, "types/*.schema.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	assert.Len(t, all, len(files))
}

func TestAnnotations(t *testing.T) {
	tests := []struct {
		eventType string
		path      string
		want      Annotation
	}{
		{"attention.requested", "kind", Annotation{Level: aep.CaptureMetadata}},
		{"attention.requested", "prompt", Annotation{Level: aep.CaptureMetadata, Exception: true}},
		{"attention.requested", "options[]", Annotation{Level: aep.CaptureMetadata}},
		{"attention.requested", "options[].label", Annotation{Level: aep.CaptureMetadata, Exception: true}},
		{"attention.requested", "fields[].label", Annotation{Level: aep.CaptureMetadata, Exception: true}},
		{"attention.requested", "fields[].choices[].id", Annotation{Level: aep.CaptureMetadata}},
		{"attention.requested", "fields[].choices[].label", Annotation{Level: aep.CaptureMetadata, Exception: true}},
		{"attention.requested", "respond_via[]", Annotation{Level: aep.CaptureMetadata}},
		{"attention.requested", "context", Annotation{Level: aep.CaptureFull}},
		{"attention.answered", "answer.text", Annotation{Level: aep.CaptureRedacted}},
		{"attention.answered", "answer.values", Annotation{Level: aep.CaptureMetadata, Exception: true}},
		{"tool.failed", "error.message", Annotation{Level: aep.CaptureRedacted}},
		{"tool.completed", "result", Annotation{Level: aep.CaptureFull}},
		{"tool.completed", "result_redacted", Annotation{Level: aep.CaptureRedacted}},
		{"tool.completed", "gen_ai.usage.input_tokens", Annotation{Level: aep.CaptureMetadata}},
		{"assessment.evaluation.recorded", "gen_ai.evaluation.explanation", Annotation{Level: aep.CaptureRedacted}},
		{"resource.citation.recorded", "citations[].source.uri", Annotation{Level: aep.CaptureRedacted}},
		{"resource.citation.recorded", "citations[].cited_text", Annotation{Level: aep.CaptureFull}},
		{"resource.retrieval.reranked", "output_documents[].content", Annotation{Level: aep.CaptureFull}},
	}
	for _, tt := range tests {
		t.Run(tt.eventType+" "+tt.path, func(t *testing.T) {
			got, ok := Annotations(tt.eventType)
			require.True(t, ok)
			require.Contains(t, got, tt.path)
			assert.Equal(t, tt.want, got[tt.path])
		})
	}
}

// TestAnnotationsExceptionFields pins the [metadata*] fields the schemas
// mark, so that a schema update adding or renaming one is noticed here.
func TestAnnotationsExceptionFields(t *testing.T) {
	all, err := loadAnnotations()
	require.NoError(t, err)
	got := map[string]degrade{}
	for eventType := range all {
		paths, ok := Annotations(eventType)
		require.True(t, ok)
		for p, a := range paths {
			if a.Exception {
				got[eventType+" "+p] = exceptionDegrade(t, all[eventType].root, p)
			}
		}
	}
	assert.Equal(t, map[string]degrade{
		"attention.requested prompt":                   degradePrompt,
		"attention.requested options[].label":          degradeLabelToID,
		"attention.requested fields[].label":           degradeLabelToID,
		"attention.requested fields[].choices[].label": degradeLabelToID,
		"attention.answered answer.values":             degradeStructuralEntries,
		"control.attention.respond answer.values":      degradeStructuralEntries,
	}, got)
}

// exceptionDegrade finds the degrade rule of a flattened path whose
// property names hold no dots (true of every exception field).
func exceptionDegrade(t *testing.T, f *field, path string) degrade {
	t.Helper()
	for path != "" {
		var step string
		step, path = cutStep(path)
		if step == "[]" {
			f = f.items
		} else {
			f = f.props[step]
		}
		require.NotNil(t, f, "path step %q", step)
	}
	return f.degrade
}

func cutStep(path string) (step, rest string) {
	if len(path) >= 2 && path[:2] == "[]" {
		rest = path[2:]
		if len(rest) > 0 && rest[0] == '.' {
			rest = rest[1:]
		}
		return "[]", rest
	}
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '.':
			return path[:i], path[i+1:]
		case '[':
			return path[:i], path[i:]
		}
	}
	return path, ""
}

func TestAnnotationsTypeWithoutSchema(t *testing.T) {
	_, ok := Annotations("x.acme.session.custom_blob")
	assert.False(t, ok)
}

func TestAnnotationsReturnsACopy(t *testing.T) {
	a, ok := Annotations("tool.completed")
	require.True(t, ok)
	a["result"] = Annotation{Level: aep.CaptureMetadata}
	b, _ := Annotations("tool.completed")
	assert.Equal(t, aep.CaptureFull, b["result"].Level)
}

func TestParseTypeSchemaFollowsRefsAndCombinators(t *testing.T) {
	raw := []byte(`{
	  "$defs": {
	    "error_info": {"type": "object", "properties": {
	      "type": {"type": "string", "x-aep-capture": "metadata"},
	      "message": {"type": "string", "x-aep-capture": "redacted"}}}
	  },
	  "type": "object",
	  "properties": {
	    "error": {"$ref": "#/$defs/error_info", "x-aep-capture": "metadata"},
	    "items": {"type": "array", "items": {"$ref": "#/$defs/error_info"}},
	    "plain": {"type": "string"}
	  },
	  "allOf": [{"properties": {"plain": {"x-aep-capture": "full"}, "extra": {"x-aep-capture": "redacted"}}}]
	}`)
	ta, err := parseTypeSchema(raw)
	require.NoError(t, err)
	assert.Equal(t, map[string]Annotation{
		"error":           {Level: aep.CaptureMetadata},
		"error.type":      {Level: aep.CaptureMetadata},
		"error.message":   {Level: aep.CaptureRedacted},
		"items":           {Level: aep.CaptureMetadata},
		"items[]":         {Level: aep.CaptureMetadata},
		"items[].type":    {Level: aep.CaptureMetadata},
		"items[].message": {Level: aep.CaptureRedacted},
		"plain":           {Level: aep.CaptureFull},
		"extra":           {Level: aep.CaptureRedacted},
	}, ta.paths)
}

func TestParseTypeSchemaErrors(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{"unknown level", `{"properties": {"a": {"x-aep-capture": "secret"}}}`, `a: x-aep-capture: unknown capture level "secret"`},
		{"remote reference", `{"properties": {"a": {"$ref": "https://x.test/s.json"}}}`, `only local references are supported`},
		{"dangling reference", `{"properties": {"a": {"$ref": "#/$defs/missing"}}}`, `does not resolve to a schema object`},
		{"cyclic reference", `{"$defs": {"n": {"properties": {"next": {"$ref": "#/$defs/n"}}}}, "properties": {"a": {"$ref": "#/$defs/n"}}}`, `deeper than 64 levels`},
		{"not JSON", `{`, `parse schema`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseTypeSchema([]byte(tt.raw))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestParseSchemasNamesTheFile(t *testing.T) {
	fsys := fstest.MapFS{"types/bad.type.schema.json": {Data: []byte(`{"properties": {"a": {"x-aep-capture": 3}}}`)}}
	_, err := parseSchemas(fsys, "types")
	require.ErrorContains(t, err, "capture: types/bad.type.schema.json: a: x-aep-capture")
}
