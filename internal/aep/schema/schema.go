// Package schema validates single AEP 0.1 events: the envelope schema
// (AEP-0001 §5), the payload schema of the event's type (AEP-0002 §5) and
// the single-event prose rules a schema cannot express (AEP-0006).
//
// Rules that need more than one event (ordering, id collisions, lifecycle,
// ack exclusivity, form answers against their request) live in package
// stream.
//
// Payload schemas are chosen from registry/types.json. Vendor (x.*) types,
// registered types without a schema (the reserved message.* types) and
// unregistered members of a registered category validate against the
// envelope only: consumers MUST tolerate unknown types (AEP-0001 §6), and
// the envelope's type grammar already refuses unregistered categories.
// A payload is checked only when data is present (capture none omits it).
//
// The envelope schema is checked by Go code that mirrors it (envelope.go);
// differential tests hold the two envelope paths to the same verdicts.
// Each payload schema is compiled to a native check of the keywords it
// uses (payload.go), which passes valid payloads and leaves every other
// one to the schema library, so errors are always the library's.
package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Rule names the family of constraints an event broke.
type Rule string

// Rules reported by ValidateJSON.
const (
	// RuleSyntax: the bytes are not one JSON object.
	RuleSyntax Rule = "syntax"
	// RuleAttribute: a core context attribute is missing or malformed
	// (AEP-0001 §5.1), e.g. aep, time, source, seq, severity, traceparent.
	RuleAttribute Rule = "attribute"
	// RuleType: type breaks the grammar or uses an unregistered category
	// (AEP-0001 §6, AEP-0002 §3).
	RuleType Rule = "type"
	// RuleScope: session, run, step or seq present or absent against the
	// type's scope class (AEP-0001 §5.2, AEP-0004 §2.2).
	RuleScope Rule = "scope"
	// RuleExtension: an extension attribute with an ill-formed name or a
	// non-scalar value (AEP-0001 §5.4).
	RuleExtension Rule = "extension"
	// RulePayload: data breaks its type's payload schema (AEP-0002 §5).
	RulePayload Rule = "payload"
	// RuleForm: a kind:"form" prose rule (AEP-0006).
	RuleForm Rule = "form"
)

var ruleSection = map[Rule]string{
	RuleSyntax:    "RFC 8259",
	RuleAttribute: "AEP-0001 §5.1",
	RuleType:      "AEP-0001 §6",
	RuleScope:     "AEP-0001 §5.2",
	RuleExtension: "AEP-0001 §5.4",
	RulePayload:   "AEP-0002 §5",
	RuleForm:      "AEP-0006",
}

// Error is a validation failure: which rule, where, and why. It never
// carries the event itself.
type Error struct {
	Rule Rule
	// Path is a JSON Pointer (RFC 6901) into the event, "" for the event as
	// a whole, e.g. "/data/fields/0".
	Path string
	// Reason says what is wrong, briefly.
	Reason string
}

func (e *Error) Error() string {
	at := e.Path
	if at == "" {
		at = "/"
	}
	return fmt.Sprintf("aep event invalid: %s rule (%s) at %s: %s", e.Rule, ruleSection[e.Rule], at, e.Reason)
}

// ValidateJSON validates one event as it travels on the wire. It returns
// nil or an *Error; a failure to load the embedded schemas (a build
// defect) is returned as a plain error.
func ValidateJSON(raw []byte) error {
	v, err := compiled()
	if err != nil {
		return err
	}
	return v.validateJSON(raw)
}

func (v *validator) validateJSON(raw []byte) error {
	doc, err := decodeEvent(raw)
	if err != nil {
		return err
	}
	return v.validateDecoded(doc)
}

// ValidateValue is ValidateJSON for a document already decoded by
// aep.DecodeValue: a caller that goes on to aep.EventOf decodes once.
func ValidateValue(doc any) error {
	v, err := compiled()
	if err != nil {
		return err
	}
	ev, err := asEvent(doc)
	if err != nil {
		return err
	}
	return v.validateDecoded(ev)
}

// decodeEvent decodes one wire event as the schema library reads JSON.
func decodeEvent(raw []byte) (map[string]any, error) {
	// DecodeValue reads JSON as jsonschema.UnmarshalJSON does (numbers
	// kept as json.Number, trailing bytes refused), in a third of the time.
	doc, err := aep.DecodeValue(raw)
	if err != nil {
		return nil, &Error{Rule: RuleSyntax, Reason: truncate(err.Error())}
	}
	return asEvent(doc)
}

func asEvent(doc any) (map[string]any, error) {
	ev, ok := doc.(map[string]any)
	if !ok {
		return nil, &Error{Rule: RuleSyntax, Reason: "an event must be a JSON object"}
	}
	return ev, nil
}

// Validate validates an event built in memory: it reaches the verdict
// ValidateJSON reaches on the event's wire form (ev.MarshalJSON), without
// writing that form unless the event holds something the wire would
// change (see wireFaithful). A caller that holds the event should call
// Validate even when it holds the wire bytes too: it is the faster path.
func Validate(ev *aep.Event) error {
	if ev == nil {
		return &Error{Rule: RuleSyntax, Reason: "no event"}
	}
	v, err := compiled()
	if err != nil {
		return err
	}
	return v.validateEvent(ev)
}

func (v *validator) validateEvent(ev *aep.Event) error {
	if err := extensionRefusal(ev.Extensions); err != nil {
		return err
	}
	if !wireFaithful(ev) {
		return v.validateWire(ev)
	}
	var env envelope
	env.readEvent(ev)
	if err := v.checkEnvelope(&env); err != nil {
		return err
	}
	if ev.Data == nil {
		return nil
	}
	return v.checkPayload(ev.Type, ev.Data)
}

// validateWire validates ev's wire form: the meaning of Validate.
func (v *validator) validateWire(ev *aep.Event) error {
	raw, err := ev.MarshalJSON()
	if err != nil {
		if errors.Is(err, aep.ErrExtension) {
			return &Error{Rule: RuleExtension, Reason: truncate(err.Error())}
		}
		return fmt.Errorf("aep event %s: marshal: %w", ev.ID, err)
	}
	return v.validateJSON(raw)
}

// extensionRefusal is the refusal ev.MarshalJSON would return for the
// extension attributes: the one of the least name it refuses.
func extensionRefusal(extensions map[string]any) error {
	var first string
	var refusal error
	for name, val := range extensions {
		if refusal != nil && name >= first {
			continue
		}
		if err := aep.CheckExtension(name, val); err != nil {
			first, refusal = name, err
		}
	}
	if refusal == nil {
		return nil
	}
	return &Error{Rule: RuleExtension, Reason: truncate(refusal.Error())}
}

// maxFaithfulDepth bounds the walk of data; deeper (or cyclic) data is
// judged by its wire form.
const maxFaithfulDepth = 64

// wireFaithful reports whether ev's wire form decodes to what ev holds,
// so that checking ev in memory is checking that form. Marshalling
// replaces invalid UTF-8, writes nil slices and maps as null, refuses a
// json.Number that is no JSON number, and writes other Go types in forms
// that decode to different ones.
func wireFaithful(ev *aep.Event) bool {
	for _, s := range [...]string{
		ev.AEP, ev.ID, ev.Type, ev.Subject, ev.Time, ev.Source, ev.Agent, ev.Session,
		ev.Run, ev.Step, ev.Cause, ev.Traceparent, string(ev.Severity), string(ev.Capture),
	} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, x := range ev.Extensions {
		if n, ok := x.(json.Number); ok && !isJSONNumber(string(n)) {
			return false
		}
	}
	return ev.Data == nil || isDecodedJSON(ev.Data, maxFaithfulDepth)
}

// isDecodedJSON reports whether v is what decoding its JSON text with
// numbers as json.Number yields.
func isDecodedJSON(v any, depth int) bool {
	if depth == 0 {
		return false
	}
	switch t := v.(type) {
	case nil, bool:
		return true
	case string:
		return utf8.ValidString(t)
	case json.Number:
		return isJSONNumber(string(t))
	case []any:
		if t == nil {
			return false
		}
		for _, x := range t {
			if !isDecodedJSON(x, depth-1) {
				return false
			}
		}
		return true
	case map[string]any:
		if t == nil {
			return false
		}
		for k, x := range t {
			if !utf8.ValidString(k) || !isDecodedJSON(x, depth-1) {
				return false
			}
		}
		return true
	}
	return false
}
