package schema

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// validate checks a decoded event: envelope first, then the payload schema
// of its type, then the prose rules.
func (v *validator) validate(ev map[string]any) error {
	if err := v.envelope.Validate(ev); err != nil {
		return envelopeError(err)
	}
	data, ok := ev["data"].(map[string]any)
	if !ok {
		return nil // absent (the envelope has checked that data is an object)
	}
	typ, _ := ev["type"].(string)
	if sch := v.payloads[typ]; sch != nil {
		if err := sch.Validate(data); err != nil {
			return payloadError(err)
		}
	}
	return checkForm(typ, data)
}

// checkForm applies the kind:"form" rule of AEP-0006 that the payload
// schema leaves to prose: fields ride only on kind "form" requests.
func checkForm(typ string, data map[string]any) error {
	if typ != "attention.requested" {
		return nil
	}
	if _, ok := data["fields"]; ok && data["kind"] != "form" {
		return &Error{Rule: RuleForm, Path: "/data/fields", Reason: fmt.Sprintf(`fields are allowed only with kind "form", not %s`, describe(data["kind"]))}
	}
	return nil
}

func describe(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("kind %q", truncate(s))
	}
	return "a request without a string kind"
}

// printer renders the schema library's messages; it is safe for
// concurrent use.
var printer = message.NewPrinter(language.English)

// Keyword locations in aep-event.schema.json that decide the rule.
const (
	scopeKeywords   = "/allOf/0"
	agentScoped     = scopeKeywords + "/then"
	foreignEmitter  = scopeKeywords + "/else/then"
	sessionScoped   = scopeKeywords + "/else/else"
	typeKeywords    = "/properties/type"
	extensionNames  = "/propertyNames"
	extensionValues = "/additionalProperties"
)

// maxReasonBytes bounds a reason so that an error never carries a large
// value from the event.
const maxReasonBytes = 200

// envelopeError turns an envelope schema failure into the rule it breaks.
func envelopeError(err error) error {
	leaf, ok := firstCause(err)
	if !ok {
		return fmt.Errorf("aep schema: envelope: %w", err)
	}
	kw := keywordLocation(leaf)
	path := pointer(leaf.InstanceLocation)
	reason := truncate(leaf.ErrorKind.LocalizedString(printer))
	switch {
	case strings.HasPrefix(kw, scopeKeywords):
		return scopeError(kw, path, leaf.ErrorKind)
	case strings.HasPrefix(kw, extensionNames):
		if p, ok := leaf.ErrorKind.(*kind.Pattern); ok {
			return &Error{Rule: RuleExtension, Path: pointer([]string{p.Got}),
				Reason: "extension attribute name must match [a-z0-9]{1,20}"}
		}
		return &Error{Rule: RuleExtension, Path: path, Reason: reason}
	case strings.HasPrefix(kw, extensionValues):
		return &Error{Rule: RuleExtension, Path: path,
			Reason: "extension attribute value must be a string, integer or boolean: " + reason}
	case strings.HasPrefix(kw, typeKeywords):
		if _, ok := leaf.ErrorKind.(*kind.Pattern); ok {
			reason = "not a registered category followed by lowercase [a-z0-9_] tokens, nor x.{vendor}.{category}.{rest}"
		}
		return &Error{Rule: RuleType, Path: path, Reason: reason}
	}
	if r, ok := leaf.ErrorKind.(*kind.Required); ok {
		return &Error{Rule: RuleAttribute, Path: pointer(r.Missing[:1]),
			Reason: "required attribute missing: " + strings.Join(r.Missing, ", ")}
	}
	return &Error{Rule: RuleAttribute, Path: path, Reason: reason}
}

// scopeError explains a failure of the envelope's scope-class conditional
// (AEP-0001 §5.2, AEP-0004 §2.2).
func scopeError(kw, path string, k jsonschema.ErrorKind) error {
	var class string
	switch {
	case strings.HasPrefix(kw, foreignEmitter):
		class = "foreign-emitter types (commands, attention.routed)"
	case strings.HasPrefix(kw, sessionScoped):
		class = "session-scoped types"
	case strings.HasPrefix(kw, agentScoped):
		class = "agent-scoped types (agent.*)"
	default:
		class = "this type"
	}
	if r, ok := k.(*kind.Required); ok {
		return &Error{Rule: RuleScope, Path: pointer(r.Missing[:1]),
			Reason: fmt.Sprintf("%s required for %s", strings.Join(r.Missing, ", "), class)}
	}
	return &Error{Rule: RuleScope, Path: path, Reason: "must be omitted for " + class}
}

func payloadError(err error) error {
	leaf, ok := firstCause(err)
	if !ok {
		return fmt.Errorf("aep schema: payload: %w", err)
	}
	path := "/data" + pointer(leaf.InstanceLocation)
	reason := leaf.ErrorKind.LocalizedString(printer)
	if r, ok := leaf.ErrorKind.(*kind.Required); ok {
		path += pointer(r.Missing[:1])
		reason = "required field missing: " + strings.Join(r.Missing, ", ")
	}
	return &Error{Rule: RulePayload, Path: path, Reason: truncate(reason)}
}

// firstCause returns the most specific cause of a validation failure,
// choosing deterministically (by instance, then keyword location) when
// several parts of the event fail.
func firstCause(err error) (*jsonschema.ValidationError, bool) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, false
	}
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return slices.MinFunc(leaves, func(a, b *jsonschema.ValidationError) int {
		return cmp.Or(
			slices.Compare(a.InstanceLocation, b.InstanceLocation),
			strings.Compare(a.SchemaURL, b.SchemaURL),
		)
	}), true
}

// keywordLocation is the schema-internal JSON Pointer of the failing
// keyword's schema, e.g. "/allOf/0/then/properties/seq".
func keywordLocation(e *jsonschema.ValidationError) string {
	_, frag, _ := strings.Cut(e.SchemaURL, "#")
	return frag
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointer renders an instance location as a JSON Pointer (RFC 6901).
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(tok))
	}
	return b.String()
}

// truncate cuts s to maxReasonBytes on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	cut := maxReasonBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
