package capture

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strings"
	"sync"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schemas"
)

// Annotation is the capture gate of one payload field (AEP-0002 §5.1).
type Annotation struct {
	// Level is the lowest capture level at which the field may ride: its
	// x-aep-capture annotation, metadata when the schema leaves it
	// unannotated (rule 4).
	Level aep.Capture
	// Exception marks an AEP-0002 §5.3 [metadata*] field: gated at
	// metadata, yet holding text that must be replaced by something
	// structural whenever the event rides below redacted.
	Exception bool
}

// Annotations returns the field annotations of eventType's payload schema,
// keyed by dotted path: "a.b" for a nested field, "a[]" for the items of an
// array and "a[].b" for their fields. Property names that themselves contain
// dots (gen_ai.usage.input_tokens) appear verbatim. The second result is
// false for a type without a payload schema (every x.* type).
func Annotations(eventType string) (map[string]Annotation, bool) {
	t, ok := lookupType(eventType)
	if !ok {
		return nil, false
	}
	return maps.Clone(t.paths), true
}

// degrade says how a [metadata*] field becomes structural below redacted.
type degrade int

const (
	degradeNone degrade = iota
	// degradePrompt synthesizes "{agent} requests {kind}: {subject}"
	// (AEP-0003 §9.2).
	degradePrompt
	// degradeLabelToID replaces a label with its sibling id, or the item's
	// 1-based index when the id is missing.
	degradeLabelToID
	// degradeStructuralEntries keeps only the number and boolean members
	// of an object (answer.values: string and free-text answers follow
	// answer.text's redacted minimum).
	degradeStructuralEntries
	// degradeDrop removes an exception field no rule above covers:
	// dropping more than required is always legal (AEP-0001 §8.2b).
	degradeDrop
)

// field is one node of a payload schema's annotation tree.
type field struct {
	level   aep.Capture
	degrade degrade
	props   map[string]*field // nil when the schema names no properties
	items   *field            // nil unless the schema describes array items
}

// typeAnnotations is one payload schema, as a tree for down-levelling and
// as flat paths for inspection.
type typeAnnotations struct {
	root  *field
	paths map[string]Annotation
}

// exceptionComments are the phrases by which the published schemas mark the
// [metadata*] fields: the prompt and label fields say "metadata-gated by
// exception", answer.values describes its "type-dependent" per-key gating.
var exceptionComments = []string{"metadata-gated by exception", "type-dependent"}

// loadAnnotations reads every payload schema once; the schemas are embedded,
// so a failure here is a defect of this module, reported by the tests.
var loadAnnotations = sync.OnceValues(func() (map[string]*typeAnnotations, error) {
	return parseSchemas(schemas.FS, "types")
})

// lookupType finds a type's annotations. Should the embedded schemas fail
// to load, every type counts as schemaless, so Downlevel errs toward
// dropping data.
func lookupType(eventType string) (*typeAnnotations, bool) {
	all, err := loadAnnotations()
	if err != nil {
		return nil, false
	}
	t, ok := all[eventType]
	return t, ok
}

func parseSchemas(fsys fs.FS, dir string) (map[string]*typeAnnotations, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.schema.json"))
	if err != nil {
		return nil, fmt.Errorf("capture: list payload schemas: %w", err)
	}
	out := make(map[string]*typeAnnotations, len(files))
	for _, file := range files {
		raw, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("capture: read %s: %w", file, err)
		}
		t, err := parseTypeSchema(raw)
		if err != nil {
			return nil, fmt.Errorf("capture: %s: %w", file, err)
		}
		out[strings.TrimSuffix(path.Base(file), ".schema.json")] = t
	}
	return out, nil
}

func parseTypeSchema(raw []byte) (*typeAnnotations, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	p := schemaParser{root: doc}
	root, err := p.node(doc, "", "", nil, 0)
	if err != nil {
		return nil, err
	}
	t := &typeAnnotations{root: root, paths: make(map[string]Annotation)}
	flatten(root, "", t.paths)
	return t, nil
}

// maxSchemaDepth bounds $ref chasing so a cyclic schema is an error, not a
// stack overflow.
const maxSchemaDepth = 64

type schemaParser struct{ root map[string]any }

// node builds the annotation tree of one subschema. name is the property
// it describes ("" for array items and the root) and siblings the other
// properties of its parent object, which the label rule needs.
func (p schemaParser) node(s map[string]any, at, name string, siblings map[string]any, depth int) (*field, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("%s: schema nests or refers deeper than %d levels", display(at), maxSchemaDepth)
	}
	f := &field{level: aep.CaptureMetadata}
	if ref, ok := s["$ref"].(string); ok {
		target, err := p.resolve(ref)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", display(at), err)
		}
		sub, err := p.node(target, at, name, siblings, depth+1)
		if err != nil {
			return nil, err
		}
		f = sub
	}
	if v, ok := s["x-aep-capture"]; ok {
		level, _ := v.(string)
		c, err := aep.ParseCapture(level)
		if err != nil {
			return nil, fmt.Errorf("%s: x-aep-capture: %w", display(at), err)
		}
		f.level = maxCapture(f.level, c)
	}
	if props, ok := s["properties"].(map[string]any); ok {
		if f.props == nil {
			f.props = make(map[string]*field, len(props))
		}
		for key, sub := range props {
			subSchema, ok := sub.(map[string]any)
			if !ok {
				continue // a boolean subschema carries no annotation
			}
			child, err := p.node(subSchema, join(at, key), key, props, depth+1)
			if err != nil {
				return nil, err
			}
			f.props[key] = merge(f.props[key], child)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		child, err := p.node(items, at+"[]", "", nil, depth+1)
		if err != nil {
			return nil, err
		}
		f.items = merge(f.items, child)
	}
	// Combinators can each describe the same field: the strictest
	// annotation of any branch wins.
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		branches, _ := s[kw].([]any)
		for _, b := range branches {
			bs, ok := b.(map[string]any)
			if !ok {
				continue
			}
			sub, err := p.node(bs, at, name, siblings, depth+1)
			if err != nil {
				return nil, err
			}
			f = merge(f, sub)
		}
	}
	if isException(s) {
		f.degrade = degradeFor(name, s, siblings)
	}
	return f, nil
}

// resolve follows a local JSON Pointer reference ("#/$defs/tool_ref").
func (p schemaParser) resolve(ref string) (map[string]any, error) {
	pointer, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("$ref %q: only local references are supported", ref)
	}
	var cur any = p.root
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			break
		}
		if tok != "" {
			cur = m[pointerUnescape.Replace(tok)]
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("$ref %q does not resolve to a schema object", ref)
	}
	return m, nil
}

var pointerUnescape = strings.NewReplacer("~1", "/", "~0", "~")

func isException(s map[string]any) bool {
	comment, _ := s["$comment"].(string)
	for _, phrase := range exceptionComments {
		if strings.Contains(comment, phrase) {
			return true
		}
	}
	return false
}

func degradeFor(name string, s, siblings map[string]any) degrade {
	switch {
	case name == "prompt":
		return degradePrompt
	case name == "label" && siblings["id"] != nil:
		return degradeLabelToID
	case s["type"] == "object":
		return degradeStructuralEntries
	default:
		return degradeDrop
	}
}

// merge combines two descriptions of the same field, keeping the stricter
// of everything.
func merge(a, b *field) *field {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := &field{
		level:   maxCapture(a.level, b.level),
		degrade: max(a.degrade, b.degrade),
		items:   merge(a.items, b.items),
	}
	if a.props != nil || b.props != nil {
		out.props = make(map[string]*field, len(a.props)+len(b.props))
		for k, v := range a.props {
			out.props[k] = v
		}
		for k, v := range b.props {
			out.props[k] = merge(out.props[k], v)
		}
	}
	return out
}

func maxCapture(a, b aep.Capture) aep.Capture {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}

func flatten(f *field, at string, out map[string]Annotation) {
	for key, child := range f.props {
		p := join(at, key)
		out[p] = Annotation{Level: child.level, Exception: child.degrade != degradeNone}
		flatten(child, p, out)
	}
	if f.items != nil {
		p := at + "[]"
		out[p] = Annotation{Level: f.items.level, Exception: f.items.degrade != degradeNone}
		flatten(f.items, p, out)
	}
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

func display(at string) string {
	if at == "" {
		return "schema root"
	}
	return at
}
