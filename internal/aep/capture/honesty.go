package capture

import (
	"fmt"
	"maps"
	"slices"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// DishonestError is an event whose data carries a field annotated above the
// capture level it declares (AEP-0001 §8.2a: data MUST honour capture).
type DishonestError struct {
	// Path is the dotted path of the first such field, as Annotations
	// names it ("answer.text", "options[]"); "" for data under capture none.
	Path string
	// Level is the field's annotation; Declared the event's capture.
	Level, Declared aep.Capture
}

func (e *DishonestError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("capture %s carries data (AEP-0001 §8.2: none is the envelope only)", e.Declared)
	}
	return fmt.Sprintf("data.%s is annotated %s, above the declared capture %s (AEP-0001 §8.2a)", e.Path, e.Level, e.Declared)
}

// CheckHonest reports, as a *DishonestError, the first field of ev's data
// (in key order) annotated above ev's capture, or data with content under
// capture none. Fields the schema leaves unannotated, and every field of a
// type without a payload schema (x.*), count as metadata (AEP-0002 §5.1
// rule 4). It cannot tell a [metadata*] field's synthesized text from
// content, and does not try. ev's capture must be a known level (the
// envelope schema's enum).
func CheckHonest(ev *aep.Event) error {
	declared := ev.EffectiveCapture()
	if declared == aep.CaptureNone {
		if len(ev.Data) > 0 {
			return &DishonestError{Declared: declared}
		}
		return nil
	}
	t, ok := lookupType(ev.Type)
	if !ok || declared == aep.CaptureFull {
		return nil
	}
	if path, level, found := aboveIn(ev.Data, t.root, "", declared); found {
		return &DishonestError{Path: path, Level: level, Declared: declared}
	}
	return nil
}

// aboveIn finds the first annotated field of obj above declared.
func aboveIn(obj map[string]any, f *field, at string, declared aep.Capture) (string, aep.Capture, bool) {
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		child, annotated := f.props[key]
		if !annotated {
			continue
		}
		p := join(at, key)
		if !declared.Allows(child.level) {
			return p, child.level, true
		}
		if path, level, found := aboveInValue(obj[key], child, p, declared); found {
			return path, level, true
		}
	}
	return "", "", false
}

func aboveInValue(v any, f *field, at string, declared aep.Capture) (string, aep.Capture, bool) {
	switch v := v.(type) {
	case map[string]any:
		if f.props != nil {
			return aboveIn(v, f, at, declared)
		}
	case []any:
		if f.items == nil || len(v) == 0 {
			return "", "", false
		}
		p := at + "[]"
		if !declared.Allows(f.items.level) {
			return p, f.items.level, true
		}
		for _, item := range v {
			if path, level, found := aboveInValue(item, f.items, p, declared); found {
				return path, level, true
			}
		}
	}
	return "", "", false
}
