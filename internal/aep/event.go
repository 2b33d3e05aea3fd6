// Package aep implements the AEP 0.1 event envelope (AEP-0001 §5): the
// sixteen context attributes, the data payload and extension attributes, with
// the marshalling rules the spec pins (absent optionals are omitted, never
// null; extension attributes are scalar and never collide with core names).
//
// Subpackages add what needs more than the envelope: schema validation,
// stream rules, capture down-levelling and redaction, and the OTLP projection.
package aep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync"
)

// Version is the only protocol version this module speaks.
const Version = "0.1"

// Event is one AEP event. String attributes use "" for absent (the schema
// requires every present string attribute to be non-empty); Seq and Epoch
// are pointers because 0 is a legal, meaningful value. Data is nil when the
// event carries no payload, and a non-nil empty map for "data":{}.
//
// Numbers inside Data are json.Number so that a decode/encode round trip
// never changes their text.
type Event struct {
	AEP         string
	ID          string
	Type        string
	Subject     string
	Time        string
	Source      string
	Agent       string
	Session     string
	Run         string
	Step        string
	Seq         *int64
	Epoch       *int64
	Cause       string
	Traceparent string
	Severity    Severity
	Capture     Capture
	Data        map[string]any
	// Extensions are the attributes that are not core ones (AEP-0001 §5.4).
	// Values are string, int64 or bool when well-formed; Unmarshal keeps
	// whatever the wire carried so that validation can report it.
	Extensions map[string]any
}

// coreNames lists the context attributes in their wire order.
var coreNames = []string{
	"aep", "id", "type", "subject", "time", "source", "agent", "session", "run",
	"step", "seq", "epoch", "cause", "traceparent", "severity", "capture", "data",
}

var coreSet = func() map[string]bool {
	m := make(map[string]bool, len(coreNames))
	for _, n := range coreNames {
		m[n] = true
	}
	return m
}()

// IsCoreAttribute reports whether name is one of the envelope's own
// attributes (including data).
func IsCoreAttribute(name string) bool { return coreSet[name] }

var extensionName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// ErrExtension is wrapped by every extension-attribute refusal.
var ErrExtension = errors.New("aep: invalid extension attribute")

// CheckExtension reports why name=value cannot ride as an extension
// attribute: a malformed name, a core name, or a non-scalar value.
func CheckExtension(name string, value any) error {
	if !extensionName.MatchString(name) {
		return fmt.Errorf("%w %q: name must match [a-z0-9]{1,20}", ErrExtension, name)
	}
	if coreSet[name] {
		return fmt.Errorf("%w %q: collides with a core attribute", ErrExtension, name)
	}
	switch v := value.(type) {
	case string, bool, int, int32, int64:
		return nil
	case json.Number:
		if _, err := v.Int64(); err != nil {
			return fmt.Errorf("%w %q: number %s is not an integer", ErrExtension, name, v)
		}
		return nil
	default:
		return fmt.Errorf("%w %q: value of type %T is not a string, integer or boolean", ErrExtension, name, value)
	}
}

// SetExtension adds an extension attribute after checking it.
func (e *Event) SetExtension(name string, value any) error {
	if err := CheckExtension(name, value); err != nil {
		return err
	}
	if e.Extensions == nil {
		e.Extensions = make(map[string]any)
	}
	e.Extensions[name] = value
	return nil
}

// Int64 returns a pointer to v, for Seq and Epoch.
func Int64(v int64) *int64 { return &v }

// EffectiveSeverity applies the envelope default (info).
func (e *Event) EffectiveSeverity() Severity {
	if e.Severity == "" {
		return SeverityInfo
	}
	return e.Severity
}

// EffectiveCapture applies the envelope default (metadata).
func (e *Event) EffectiveCapture() Capture {
	if e.Capture == "" {
		return CaptureMetadata
	}
	return e.Capture
}

// EffectiveEpoch applies the envelope default (0).
func (e *Event) EffectiveEpoch() int64 {
	if e.Epoch == nil {
		return 0
	}
	return *e.Epoch
}

// MarshalJSON writes the envelope in wire order, omitting absent optionals
// and refusing ill-formed extension attributes (AEP-0001 §5.4).
func (e Event) MarshalJSON() ([]byte, error) {
	b := borrowBuffer()
	defer returnBuffer(b)
	b.WriteByte('{')
	first := true
	field := func(name string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		_ = writeJSONString(b, name) // a string always encodes
		b.WriteByte(':')
	}
	str := func(name, v string) error {
		if v == "" {
			return nil
		}
		field(name)
		return writeJSONString(b, v)
	}
	for _, kv := range [...]struct{ k, v string }{
		{"aep", e.AEP}, {"id", e.ID}, {"type", e.Type}, {"subject", e.Subject},
		{"time", e.Time}, {"source", e.Source}, {"agent", e.Agent},
		{"session", e.Session}, {"run", e.Run}, {"step", e.Step},
	} {
		if err := str(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	if e.Seq != nil {
		field("seq")
		b.Write(strconv.AppendInt(b.AvailableBuffer(), *e.Seq, 10))
	}
	if e.Epoch != nil {
		field("epoch")
		b.Write(strconv.AppendInt(b.AvailableBuffer(), *e.Epoch, 10))
	}
	for _, kv := range [...]struct{ k, v string }{
		{"cause", e.Cause}, {"traceparent", e.Traceparent},
		{"severity", string(e.Severity)}, {"capture", string(e.Capture)},
	} {
		if err := str(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	var nameBuf [smallMap]string
	names := nameBuf[:0]
	if len(e.Extensions) > len(nameBuf) {
		names = make([]string, 0, len(e.Extensions))
	}
	for n := range e.Extensions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := e.Extensions[n]
		if err := CheckExtension(n, v); err != nil {
			return nil, err
		}
		field(n)
		if err := writeJSON(b, v); err != nil {
			return nil, err
		}
	}
	if e.Data != nil {
		field("data")
		if err := writeJSONValue(b, e.Data, maxWalkDepth); err != nil {
			return nil, fmt.Errorf("aep: marshal data of %s %s: %w", e.Type, e.ID, err)
		}
	}
	b.WriteByte('}')
	return bytes.Clone(b.Bytes()), nil
}

// buffers lend MarshalJSON and the canonical writer the buffer they write
// in: the result is copied out at its size, once, instead of a buffer
// growing per event.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer keeps a rare large event's buffer out of the pool.
const maxPooledBuffer = 64 << 10

func borrowBuffer() *bytes.Buffer { return buffers.Get().(*bytes.Buffer) }

func returnBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuffer {
		b.Reset()
		buffers.Put(b)
	}
}

// writeJSONString writes s as writeJSON would. Envelope strings are
// almost always printable ASCII without quotes or backslashes, which need
// no escaping: those skip the encoder, the rest take it.
func writeJSONString(b *bytes.Buffer, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return writeJSON(b, s)
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
	return nil
}

// smallMap is how many keys the writers sort in an array on their stack;
// a map with more takes a slice from the heap, made at its size.
const smallMap = 16

// maxWalkDepth bounds writeJSONValue's own walk; deeper (or cyclic)
// values are the encoder's to write or refuse.
const maxWalkDepth = 64

// writeJSONValue writes v as writeJSON would. It walks the types decoded
// JSON is made of itself (objects with their keys sorted, as the encoder
// sorts them, arrays, strings, booleans, null) and hands every other value
// to the encoder, which the per-value reflection of a whole payload made
// the costliest part of marshalling an event.
func writeJSONValue(b *bytes.Buffer, v any, depth int) error {
	if depth == 0 {
		return writeJSON(b, v)
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case string:
		return writeJSONString(b, t)
	case map[string]any:
		if t == nil {
			b.WriteString("null")
			return nil
		}
		var keyBuf [smallMap]string
		keys := keyBuf[:0]
		if len(t) > len(keyBuf) {
			keys = make([]string, 0, len(t))
		}
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONString(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJSONValue(b, t[k], depth-1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		if t == nil {
			b.WriteString("null")
			return nil
		}
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONValue(b, x, depth-1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		return writeJSON(b, v)
	}
	return nil
}

func writeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode appends a newline.
	return nil
}

// UnmarshalJSON reads an envelope. Core attributes of the wrong JSON type are
// an error; unknown attributes are kept as extensions, whatever their value,
// so that a relay can preserve them and validation can judge them.
func (e *Event) UnmarshalJSON(raw []byte) error {
	v, err := DecodeValue(raw)
	if err != nil {
		return fmt.Errorf("aep: event is not a JSON object: %w", err)
	}
	return e.fromValue(v)
}

// fromValue reads an envelope decoded by DecodeValue.
func (e *Event) fromValue(v any) error {
	fields, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("aep: event must be a JSON object, got %s", jsonKind(v))
	}
	*e = Event{}
	for name, val := range fields {
		if err := e.setAttribute(name, val); err != nil {
			return err
		}
	}
	return nil
}

// setAttribute stores one decoded top-level member.
func (e *Event) setAttribute(name string, val any) error {
	switch name {
	case "seq", "epoch":
		n, ok := val.(json.Number)
		if !ok {
			return fmt.Errorf("aep: attribute %q must be an integer, got %s", name, jsonKind(val))
		}
		i, err := n.Int64()
		if err != nil {
			return fmt.Errorf("aep: attribute %q must be an integer, got %s", name, n)
		}
		if name == "seq" {
			e.Seq = &i
		} else {
			e.Epoch = &i
		}
	case "data":
		m, ok := val.(map[string]any)
		if !ok {
			return fmt.Errorf("aep: attribute \"data\" must be an object, got %s", jsonKind(val))
		}
		e.Data = m
	default:
		if p := e.stringAttribute(name); p != nil {
			s, ok := val.(string)
			if !ok {
				return fmt.Errorf("aep: attribute %q must be a string, got %s", name, jsonKind(val))
			}
			*p = s
			return nil
		}
		if n, ok := val.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				val = i
			}
		}
		if e.Extensions == nil {
			e.Extensions = make(map[string]any)
		}
		e.Extensions[name] = val
	}
	return nil
}

// StringAttribute returns the value of a string core attribute ("" when
// absent) and whether name is one: aep, id, type, subject, time, source,
// agent, session, run, step, cause, traceparent, severity or capture.
func (e *Event) StringAttribute(name string) (string, bool) {
	if p := e.stringAttribute(name); p != nil {
		return *p, true
	}
	return "", false
}

// stringAttribute returns the field of a string core attribute, nil for
// any other name.
func (e *Event) stringAttribute(name string) *string {
	switch name {
	case "aep":
		return &e.AEP
	case "id":
		return &e.ID
	case "type":
		return &e.Type
	case "subject":
		return &e.Subject
	case "time":
		return &e.Time
	case "source":
		return &e.Source
	case "agent":
		return &e.Agent
	case "session":
		return &e.Session
	case "run":
		return &e.Run
	case "step":
		return &e.Step
	case "cause":
		return &e.Cause
	case "traceparent":
		return &e.Traceparent
	case "severity":
		return (*string)(&e.Severity)
	case "capture":
		return (*string)(&e.Capture)
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// Parse decodes one wire event.
func Parse(raw []byte) (*Event, error) {
	var e Event
	if err := e.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	return &e, nil
}

// EventOf reads one wire event already decoded by DecodeValue, as Parse
// reads its text; the event keeps v's maps.
func EventOf(v any) (*Event, error) {
	var e Event
	if err := e.fromValue(v); err != nil {
		return nil, err
	}
	return &e, nil
}

// Clone returns a deep copy, so a hop can down-level or redact without
// touching the caller's event.
func (e *Event) Clone() *Event {
	c := *e
	if e.Seq != nil {
		c.Seq = Int64(*e.Seq)
	}
	if e.Epoch != nil {
		c.Epoch = Int64(*e.Epoch)
	}
	if e.Data != nil {
		c.Data = CloneValue(e.Data).(map[string]any)
	}
	if e.Extensions != nil {
		c.Extensions = make(map[string]any, len(e.Extensions))
		for k, v := range e.Extensions {
			c.Extensions[k] = CloneValue(v)
		}
	}
	return &c
}

// CloneValue deep-copies a decoded JSON value (maps and slices; scalars are
// immutable).
func CloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = CloneValue(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = CloneValue(x)
		}
		return s
	default:
		return v
	}
}
