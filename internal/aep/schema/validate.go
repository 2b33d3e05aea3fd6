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

// validateDecoded checks a decoded event: the envelope natively, then
// the payload schema of its type, then the prose rules.
func (v *validator) validateDecoded(doc map[string]any) error {
	var env envelope
	env.readDecoded(doc)
	if err := v.checkEnvelope(&env); err != nil {
		return err
	}
	return v.checkDecodedPayload(doc)
}

// validateBySchema checks a decoded event by the schema library alone,
// the envelope schema and the payload schema walked: the reference the
// native checks are proven against (differential_test.go,
// payload_test.go).
func (v *validator) validateBySchema(doc map[string]any) error {
	if err := v.envelope.Validate(doc); err != nil {
		return envelopeError(err)
	}
	if typ, data, ok := payloadOf(doc); ok {
		return v.checkPayloadBySchema(typ, data)
	}
	return nil
}

func (v *validator) checkDecodedPayload(doc map[string]any) error {
	if typ, data, ok := payloadOf(doc); ok {
		return v.checkPayload(typ, data)
	}
	return nil
}

// payloadOf returns a decoded event's type and data; ok is false when
// data is absent (the envelope has checked that data is an object).
func payloadOf(doc map[string]any) (typ string, data map[string]any, ok bool) {
	data, ok = doc["data"].(map[string]any)
	typ, _ = doc["type"].(string)
	return typ, data, ok
}

// checkPayload checks data against its type's payload schema, then the
// prose rules. What the native check does not pass the library judges.
func (v *validator) checkPayload(typ string, data map[string]any) error {
	if p := v.payloads[typ]; p.check != nil && p.check.passes(data) {
		return checkForm(typ, data)
	}
	return v.checkPayloadBySchema(typ, data)
}

// checkPayloadBySchema is checkPayload with the payload schema walked by
// the schema library.
func (v *validator) checkPayloadBySchema(typ string, data map[string]any) error {
	if p, ok := v.payloads[typ]; ok {
		if err := p.library.Validate(data); err != nil {
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
			return badExtensionName(p.Got)
		}
		return &Error{Rule: RuleExtension, Path: path, Reason: reason}
	case strings.HasPrefix(kw, extensionValues):
		return badExtensionValue(leaf.InstanceLocation[len(leaf.InstanceLocation)-1], reason)
	case strings.HasPrefix(kw, typeKeywords):
		if _, ok := leaf.ErrorKind.(*kind.Pattern); ok {
			reason = typeGrammar
		}
		return &Error{Rule: RuleType, Path: path, Reason: reason}
	}
	if r, ok := leaf.ErrorKind.(*kind.Required); ok {
		return attributesMissing(r.Missing)
	}
	return &Error{Rule: RuleAttribute, Path: path, Reason: reason}
}

// scopeError explains a failure of the envelope's scope-class conditional
// (AEP-0001 §5.2, AEP-0004 §2.2).
func scopeError(kw, path string, k jsonschema.ErrorKind) error {
	class := sessionScopedClass
	switch {
	case strings.HasPrefix(kw, foreignEmitter):
		class = foreignEmitterClass
	case strings.HasPrefix(kw, agentScoped):
		class = agentScopedClass
	}
	if r, ok := k.(*kind.Required); ok {
		return scopeMissing(r.Missing, class)
	}
	return scopeForbidden(path, class)
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
