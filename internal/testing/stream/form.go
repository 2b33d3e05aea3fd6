package stream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// formField is what the values rule needs of one field_spec (AEP-0006).
type formField struct {
	id       string
	kind     string // field_spec.type: string, number, boolean or select
	required bool
	multi    bool
	other    bool
	choices  []string // choices[].id
}

// requestedForm returns the fields of a kind:"form" attention.requested,
// nil for any other request. Ill-formed field specs are skipped: their
// shape is the payload schema's concern, not this rule's.
func requestedForm(ev *aep.Event) []formField {
	if ev.Data["kind"] != "form" {
		return nil
	}
	specs, _ := ev.Data["fields"].([]any)
	fields := make([]formField, 0, len(specs))
	for _, s := range specs {
		spec, _ := s.(map[string]any)
		id, ok := spec["id"].(string)
		if !ok {
			continue
		}
		f := formField{id: strings.Clone(id)}
		f.kind, _ = spec["type"].(string)
		f.kind = strings.Clone(f.kind)
		f.required, _ = spec["required"].(bool)
		f.multi, _ = spec["multi"].(bool)
		f.other, _ = spec["other"].(bool)
		choices, _ := spec["choices"].([]any)
		for _, c := range choices {
			choice, _ := c.(map[string]any)
			if cid, ok := choice["id"].(string); ok {
				f.choices = append(f.choices, strings.Clone(cid))
			}
		}
		fields = append(fields, f)
	}
	return fields
}

// checkFormAnswer judges an attention.answered against the open kind:"form"
// request its subject names: values must cover every required field, give
// each field a value of its type (a choices[].id for a select, an array of
// them when multi, free text only where other:true), and carry free text
// (string fields, other answers) only at capture redacted or full.
func checkFormAnswer(st *session, ev *aep.Event) string {
	if st == nil || ev.Type != "attention.answered" {
		return ""
	}
	fields := st.open[ev.Subject]
	if fields == nil {
		return "" // not an open form request
	}
	answer, _ := ev.Data["answer"].(map[string]any)
	raw, ok := answer["values"]
	if !ok {
		return ""
	}
	values, ok := raw.(map[string]any)
	if !ok {
		return "answer.values must be an object"
	}
	textAllowed := ev.EffectiveCapture().Rank() >= aep.CaptureRedacted.Rank()
	for _, f := range fields {
		v, ok := values[f.id]
		if !ok {
			if f.required {
				return fmt.Sprintf("answer.values misses required field %q", f.id)
			}
			continue
		}
		freeText, reason := f.judge(v)
		if reason != "" {
			return fmt.Sprintf("answer.values[%q]: %s", f.id, reason)
		}
		if freeText && !textAllowed {
			return fmt.Sprintf("answer.values[%q] is free text, allowed only at capture redacted or full, not %s", f.id, ev.EffectiveCapture())
		}
	}
	return ""
}

// judge checks one value against its field and reports whether it is
// free text.
func (f formField) judge(v any) (freeText bool, reason string) {
	switch f.kind {
	case "string":
		if _, ok := v.(string); !ok {
			return false, "a string field needs a string"
		}
		return true, ""
	case "number":
		if !isNumber(v) {
			return false, "a number field needs a number"
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return false, "a boolean field needs a boolean"
		}
	case "select":
		picks := []any{v}
		if f.multi {
			list, ok := v.([]any)
			if !ok {
				return false, "a multi select needs an array of choices[].id"
			}
			picks = list
		}
		for _, p := range picks {
			s, ok := p.(string)
			switch {
			case !ok:
				return false, "a select needs choices[].id strings"
			case slices.Contains(f.choices, s):
			case f.other:
				freeText = true
			default:
				return false, "not a choices[].id, and the field does not allow other"
			}
		}
	}
	return freeText, ""
}

func isNumber(v any) bool {
	switch v.(type) {
	case json.Number, float64, float32, int, int32, int64:
		return true
	}
	return false
}
