package schema

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The envelope checks below are aep-event.schema.json written out in Go:
// walking the envelope schema with the schema library cost most of an
// event's validation time. They reach the verdict, Rule and Path of that
// walk (validateBySchema), which differential_test.go proves over the
// golden events, the invalid fixtures and thousands of mutations.

// attribute is one of the envelope's own properties (AEP-0001 §5.1).
type attribute uint8

const (
	attrAEP attribute = iota
	attrID
	attrType
	attrSubject
	attrTime
	attrSource
	attrAgent
	attrSession
	attrRun
	attrStep
	attrSeq
	attrEpoch
	attrCause
	attrTraceparent
	attrSeverity
	attrCapture
	attrData
	numAttributes
)

var attributeNames = [numAttributes]string{
	"aep", "id", "type", "subject", "time", "source", "agent", "session", "run",
	"step", "seq", "epoch", "cause", "traceparent", "severity", "capture", "data",
}

func (a attribute) String() string { return attributeNames[a] }

// attributeNamed finds the attribute a member name denotes; every other
// name is an extension attribute.
func attributeNamed(name string) (attribute, bool) {
	switch name {
	case "aep":
		return attrAEP, true
	case "id":
		return attrID, true
	case "type":
		return attrType, true
	case "subject":
		return attrSubject, true
	case "time":
		return attrTime, true
	case "source":
		return attrSource, true
	case "agent":
		return attrAgent, true
	case "session":
		return attrSession, true
	case "run":
		return attrRun, true
	case "step":
		return attrStep, true
	case "seq":
		return attrSeq, true
	case "epoch":
		return attrEpoch, true
	case "cause":
		return attrCause, true
	case "traceparent":
		return attrTraceparent, true
	case "severity":
		return attrSeverity, true
	case "capture":
		return attrCapture, true
	case "data":
		return attrData, true
	}
	return 0, false
}

// requiredAttributes are the envelope's required properties, in the
// schema's order (which decides the first one an error names).
var requiredAttributes = []attribute{attrAEP, attrID, attrType, attrTime, attrSource, attrAgent}

// valueKind is the JSON type of a member as the schema library sees it.
type valueKind uint8

const (
	kindAbsent valueKind = iota
	kindNull
	kindBool
	// kindNumber is a JSON number literal, held in value.text.
	kindNumber
	// kindInteger is an integer held in memory (aep.Event's seq and epoch,
	// integer extension values), in value.int.
	kindInteger
	kindString
	kindArray
	kindObject
	// kindOther is a Go value with no JSON type.
	kindOther
)

// value is one top-level member, classified without boxing it.
type value struct {
	kind valueKind
	text string
	int  int64
}

// valueOf classifies a decoded member or an in-memory extension value.
func valueOf(v any) value {
	switch t := v.(type) {
	case nil:
		return value{kind: kindNull}
	case bool:
		return value{kind: kindBool}
	case json.Number:
		return value{kind: kindNumber, text: string(t)}
	case int:
		return value{kind: kindInteger, int: int64(t)}
	case int32:
		return value{kind: kindInteger, int: int64(t)}
	case int64:
		return value{kind: kindInteger, int: t}
	case string:
		return value{kind: kindString, text: t}
	case []any:
		return value{kind: kindArray}
	case map[string]any:
		return value{kind: kindObject}
	default:
		return value{kind: kindOther}
	}
}

// stringValue is an aep.Event string attribute, where "" is absent.
func stringValue(s string) value {
	if s == "" {
		return value{}
	}
	return value{kind: kindString, text: s}
}

func int64Value(p *int64) value {
	if p == nil {
		return value{}
	}
	return value{kind: kindInteger, int: *p}
}

func (v value) kindName() string {
	switch v.kind {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindNumber, kindInteger:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	case kindObject:
		return "object"
	default:
		return "a value with no JSON type"
	}
}

// integer reports whether v is an integral number (the schema's
// "integer") and whether it is below zero.
func (v value) integer() (integer, negative bool) {
	switch v.kind {
	case kindInteger:
		return true, v.int < 0
	case kindNumber:
		return numberLiteral(v.text)
	}
	return false, false
}

// isExtensionValue mirrors the schema's additionalProperties: a string,
// an integer or a boolean.
func (v value) isExtensionValue() bool {
	switch v.kind {
	case kindString, kindBool, kindInteger:
		return true
	case kindNumber:
		integer, _ := numberLiteral(v.text)
		return integer
	}
	return false
}

// got describes a value that is not what the schema wants, never
// quoting it.
func (v value) got() string {
	if v.kind == kindNumber {
		return "got a non-integer number"
	}
	return "got " + v.kindName()
}

// envelope is an event's top level as the envelope schema sees it.
type envelope struct {
	core [numAttributes]value
	// badName is the least extension name that breaks the name grammar.
	badName    string
	hasBadName bool
	// badValue is the least extension name whose value is not a string,
	// integer or boolean, and badValueOf that value.
	badValue    string
	badValueOf  value
	hasBadValue bool
}

// addExtension records one extension attribute; the schema judges its
// name and its value independently.
func (env *envelope) addExtension(name string, v value) {
	if !isExtensionName(name) && (!env.hasBadName || name < env.badName) {
		env.badName, env.hasBadName = name, true
	}
	if !v.isExtensionValue() && (!env.hasBadValue || name < env.badValue) {
		env.badValue, env.badValueOf, env.hasBadValue = name, v, true
	}
}

// missing names the attributes of want that are absent, in want's order;
// nil when none is.
func (env *envelope) missing(want []attribute) []string {
	var names []string
	for _, a := range want {
		if env.core[a].kind == kindAbsent {
			names = append(names, a.String())
		}
	}
	return names
}

// readDecoded fills env from a decoded event.
func (env *envelope) readDecoded(doc map[string]any) {
	for name, v := range doc {
		if a, ok := attributeNamed(name); ok {
			env.core[a] = valueOf(v)
		} else {
			env.addExtension(name, valueOf(v))
		}
	}
}

// readEvent fills env from ev as its wire form would decode; wireFaithful
// says when it does.
func (env *envelope) readEvent(ev *aep.Event) {
	for a, s := range [...]string{
		attrAEP: ev.AEP, attrID: ev.ID, attrType: ev.Type, attrSubject: ev.Subject,
		attrTime: ev.Time, attrSource: ev.Source, attrAgent: ev.Agent,
		attrSession: ev.Session, attrRun: ev.Run, attrStep: ev.Step,
		attrCause: ev.Cause, attrTraceparent: ev.Traceparent,
		attrSeverity: string(ev.Severity), attrCapture: string(ev.Capture),
	} {
		env.core[a] = stringValue(s)
	}
	env.core[attrSeq] = int64Value(ev.Seq)
	env.core[attrEpoch] = int64Value(ev.Epoch)
	if ev.Data != nil {
		env.core[attrData] = value{kind: kindObject}
	}
	for name, v := range ev.Extensions {
		env.addExtension(name, valueOf(v))
	}
}

// scopeClass is the branch of the envelope's scope conditional an event
// takes (AEP-0001 §5.2, AEP-0004 §2.2).
type scopeClass uint8

const (
	sessionScopedClass scopeClass = iota
	agentScopedClass
	foreignEmitterClass
)

func (c scopeClass) String() string {
	switch c {
	case agentScopedClass:
		return "agent-scoped types (agent.*)"
	case foreignEmitterClass:
		return "foreign-emitter types (commands, attention.routed)"
	default:
		return "session-scoped types"
	}
}

// classOf mirrors the conditional's ifs. Their type patterns apply to
// strings only, so a type of any other JSON type takes the first branch.
func classOf(typ value) scopeClass {
	switch {
	case typ.kind == kindAbsent:
		return sessionScopedClass
	case typ.kind != kindString, strings.HasPrefix(typ.text, "agent."):
		return agentScopedClass
	case isForeignEmitterType(typ.text):
		return foreignEmitterClass
	default:
		return sessionScopedClass
	}
}

// required lists the attributes the class requires, in the schema's order.
func (c scopeClass) required() []attribute {
	switch c {
	case agentScopedClass:
		return nil
	case foreignEmitterClass:
		return []attribute{attrSession}
	default:
		return []attribute{attrSession, attrSeq}
	}
}

// forbids reports whether the class requires a to be omitted.
func (c scopeClass) forbids(a attribute) bool {
	switch c {
	case agentScopedClass:
		return a == attrSession || a == attrRun || a == attrStep || a == attrSeq
	case foreignEmitterClass:
		return a == attrSeq
	}
	return false
}

// checkEnvelope reports the failure the schema walk would rank first. The
// walk ranks failures by instance location, then schema location, so
// failures of the event as a whole come first (its required attributes,
// then the scope class's, then extension names), then failures of one
// member, least name first; on one member the scope class's ban
// (allOf/...) precedes the member's own schema (properties/...).
func (v *validator) checkEnvelope(env *envelope) error {
	if missing := env.missing(requiredAttributes); missing != nil {
		return attributesMissing(missing)
	}
	class := classOf(env.core[attrType])
	if missing := env.missing(class.required()); missing != nil {
		return scopeMissing(missing, class)
	}
	if env.hasBadName {
		return badExtensionName(env.badName)
	}
	var first *Error
	firstName := ""
	for a := range numAttributes {
		val := env.core[a]
		if val.kind == kindAbsent || (first != nil && a.String() >= firstName) {
			continue
		}
		var err *Error
		if class.forbids(a) {
			err = scopeForbidden("/"+a.String(), class)
		} else if err = v.checkAttribute(a, val); err == nil {
			continue
		}
		first, firstName = err, a.String()
	}
	if env.hasBadValue && (first == nil || env.badValue < firstName) {
		return badExtensionValue(env.badValue, env.badValueOf.got())
	}
	if first == nil {
		return nil
	}
	return first
}

// checkAttribute checks one core attribute against its properties schema.
func (v *validator) checkAttribute(a attribute, val value) *Error {
	reason := v.attributeReason(a, val)
	if reason == "" {
		return nil
	}
	rule := RuleAttribute
	if a == attrType {
		rule = RuleType
	}
	return &Error{Rule: rule, Path: "/" + a.String(), Reason: truncate(reason)}
}

// attributeReason says why val breaks attribute a's schema, "" if it does
// not.
func (v *validator) attributeReason(a attribute, val value) string {
	switch a {
	case attrAEP:
		if val.kind != kindString || val.text != aep.Version {
			return fmt.Sprintf("must be %q", aep.Version)
		}
	case attrSeq, attrEpoch:
		integer, negative := val.integer()
		if !integer {
			return val.got() + ", want integer"
		}
		if negative {
			return "must not be negative"
		}
	case attrSeverity:
		if val.kind != kindString || aep.Severity(val.text).Rank() < 0 {
			return "must be one of debug, info, notice, warning, error, critical"
		}
	case attrCapture:
		if val.kind != kindString || aep.Capture(val.text).Rank() < 0 {
			return "must be one of none, metadata, redacted, full"
		}
	case attrData:
		if val.kind != kindObject {
			return "got " + val.kindName() + ", want object"
		}
	default:
		if val.kind != kindString {
			return "got " + val.kindName() + ", want string"
		}
		return v.stringReason(a, val.text)
	}
	return ""
}

// stringReason checks the content of a string attribute.
// sourceURI checks a source against the uri format once: a stream carries
// the same few sources over and over, and parsing one is most of an
// envelope check. At most maxKnownSources are remembered.
func (v *validator) sourceURI(s string) error {
	if _, ok := v.knownSources.Load(s); ok {
		return nil
	}
	if err := v.uri(s); err != nil {
		return err
	}
	if v.knownSourceCount.Add(1) <= maxKnownSources {
		v.knownSources.Store(s, struct{}{})
	}
	return nil
}

const maxKnownSources = 4096

func (v *validator) stringReason(a attribute, s string) string {
	switch a {
	case attrType:
		if !isEventType(s) {
			return typeGrammar
		}
	case attrTime:
		if why := dateTimeReason(s); why != "" {
			return "not an RFC 3339 date-time: " + why
		}
	case attrSource:
		// The uri format refuses "" too, before minLength would.
		if err := v.sourceURI(s); err != nil {
			return "not an absolute URI: " + err.Error()
		}
	case attrTraceparent:
		if !isTraceparent(s) {
			return "not a W3C traceparent (2-32-16-2 lowercase hex digits joined by -)"
		}
	default:
		if s == "" {
			return "must not be empty"
		}
	}
	return ""
}

// The errors below are shared by the native checks and the schema walk,
// so that both word a failure alike.

const typeGrammar = "not a registered category followed by lowercase [a-z0-9_] tokens, nor x.{vendor}.{category}.{rest}"

func attributesMissing(missing []string) *Error {
	return &Error{Rule: RuleAttribute, Path: pointer(missing[:1]),
		Reason: "required attribute missing: " + strings.Join(missing, ", ")}
}

func scopeMissing(missing []string, class scopeClass) *Error {
	return &Error{Rule: RuleScope, Path: pointer(missing[:1]),
		Reason: fmt.Sprintf("%s required for %s", strings.Join(missing, ", "), class)}
}

func scopeForbidden(path string, class scopeClass) *Error {
	return &Error{Rule: RuleScope, Path: path, Reason: "must be omitted for " + class.String()}
}

func badExtensionName(name string) *Error {
	return &Error{Rule: RuleExtension, Path: pointer([]string{name}),
		Reason: "extension attribute name must match [a-z0-9]{1,20}"}
}

func badExtensionValue(name, why string) *Error {
	return &Error{Rule: RuleExtension, Path: pointer([]string{name}),
		Reason: truncate("extension attribute value must be a string, integer or boolean: " + why)}
}
