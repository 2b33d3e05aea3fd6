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
package schema

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

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
	// UnmarshalJSON keeps numbers as json.Number and refuses trailing bytes.
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &Error{Rule: RuleSyntax, Reason: truncate(err.Error())}
	}
	ev, ok := doc.(map[string]any)
	if !ok {
		return &Error{Rule: RuleSyntax, Reason: "an event must be a JSON object"}
	}
	return v.validate(ev)
}

// Validate validates an event built in memory by checking its wire form.
// A caller that holds the wire bytes anyway should call ValidateJSON and
// save the marshalling.
func Validate(ev *aep.Event) error {
	if ev == nil {
		return &Error{Rule: RuleSyntax, Reason: "no event"}
	}
	raw, err := ev.MarshalJSON()
	if err != nil {
		if errors.Is(err, aep.ErrExtension) {
			return &Error{Rule: RuleExtension, Reason: truncate(err.Error())}
		}
		return fmt.Errorf("aep event %s: marshal: %w", ev.ID, err)
	}
	return ValidateJSON(raw)
}
