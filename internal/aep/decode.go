package aep

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDecodeDepth is encoding/json's nesting limit, kept so that both
// refuse the same documents.
const maxDecodeDepth = 10000

// DecodeValue decodes one JSON value (RFC 8259) into the values
// encoding/json gives an interface with UseNumber: map[string]any, []any,
// json.Number, string, bool and nil. Trailing data is refused. It reaches
// encoding/json's result for every document (a later duplicate member
// wins, invalid UTF-8 and lone surrogates read as U+FFFD) without its
// reflection: every frame the receiver reads and every event a relay
// takes passes here, so this is the hot path of both.
func DecodeValue(raw []byte) (any, error) {
	d := decoders.Get().(*decoder)
	defer d.release()
	d.data, d.pos = raw, 0
	d.skipSpace()
	v, err := d.value(0)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// ErrNotObject is DecodeMembers' refusal of a valid document that is not
// a JSON object.
var ErrNotObject = errors.New("json: not an object")

// DecodeMembers decodes one JSON object as DecodeValue does, but hands each
// of its members to member, in document order, instead of building the
// object's map: a caller that keeps a few members in fields of its own
// makes no map to throw away. A name may come more than once (DecodeValue
// keeps the last). Nothing is handed over unless the whole document
// decodes; a valid one that is not an object is refused with ErrNotObject.
func DecodeMembers(raw []byte, member func(name string, value any)) error {
	d := decoders.Get().(*decoder)
	defer d.release()
	d.data, d.pos = raw, 0
	d.skipSpace()
	object := d.pos < len(d.data) && d.data[d.pos] == '{'
	var base int
	var err error
	if object {
		base, err = d.readMembers(1)
	} else {
		_, err = d.value(0)
	}
	if err == nil {
		err = d.end()
	}
	switch {
	case err != nil:
		return err
	case !object:
		return ErrNotObject
	}
	for _, m := range d.members[base:] {
		member(m.key, m.value)
	}
	return nil
}

// end refuses what follows the document's one value.
func (d *decoder) end() error {
	if d.skipSpace(); d.pos < len(d.data) {
		return d.errorf("trailing data after JSON value")
	}
	return nil
}

// decoder is one pass over a document; pos is the next byte to read.
type decoder struct {
	data []byte
	pos  int
	// buf is reused by every string that needs unescaping.
	buf []byte
	// members holds the members of the objects being read, innermost last;
	// elements likewise the elements of the arrays.
	members  []member
	elements []any
	// keys interns member names: the same few dozen recur in every
	// document, and a lookup by bytes allocates nothing.
	keys map[string]string
}

// maxInternedKeys bounds keys against documents that invent names.
const maxInternedKeys = 1024

type member struct {
	key   string
	value any
}

// decoders keeps decoders' scratch space (buf, members, elements) between
// documents.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

func (d *decoder) release() {
	// What an error left; a closed object or array clears its own.
	clear(d.members)
	clear(d.elements)
	d.data, d.members, d.elements, d.buf = nil, d.members[:0], d.elements[:0], d.buf[:0]
	decoders.Put(d)
}

var errUnexpectedEnd = errors.New("unexpected end of JSON input")

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("json: offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

func (d *decoder) unexpected() error {
	if d.pos >= len(d.data) {
		return errUnexpectedEnd
	}
	return d.errorf("invalid character %q", d.data[d.pos])
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if d.pos >= len(d.data) {
		return nil, errUnexpectedEnd
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.string()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	default:
		return nil, d.unexpected()
	}
}

func (d *decoder) literal(word string) error {
	for i := range len(word) {
		if d.pos >= len(d.data) || d.data[d.pos] != word[i] {
			return d.unexpected()
		}
		d.pos++
	}
	return nil
}

// object reads an object at its opening brace. Its members wait on the
// members stack until the closing brace, so that the map is made at its
// final size once rather than grown.
func (d *decoder) object(depth int) (any, error) {
	base, err := d.readMembers(depth)
	if err != nil {
		return nil, err
	}
	members := d.members[base:]
	obj := make(map[string]any, len(members))
	for _, m := range members {
		obj[m.key] = m.value // a later duplicate wins
	}
	clear(members)
	d.members = d.members[:base]
	return obj, nil
}

// readMembers reads an object at its opening brace onto the members
// stack, from base on.
func (d *decoder) readMembers(depth int) (base int, err error) {
	base = len(d.members)
	if depth > maxDecodeDepth {
		return base, d.errorf("exceeded max depth")
	}
	d.pos++ // {
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return base, nil
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return base, d.unexpected()
		}
		key, err := d.key()
		if err != nil {
			return base, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return base, d.unexpected()
		}
		d.pos++
		d.skipSpace()
		v, err := d.value(depth)
		if err != nil {
			return base, err
		}
		d.members = append(d.members, member{key, v})
		switch closed, err := d.next('}'); {
		case err != nil:
			return base, err
		case closed:
			return base, nil
		}
	}
}

// next reads what follows a member or an element: a comma, or the
// closing bracket, which closed reports.
func (d *decoder) next(closing byte) (closed bool, err error) {
	d.skipSpace()
	switch {
	case d.pos >= len(d.data):
		return false, errUnexpectedEnd
	case d.data[d.pos] == ',':
		d.pos++
		d.skipSpace()
		return false, nil
	case d.data[d.pos] == closing:
		d.pos++
		return true, nil
	default:
		return false, d.unexpected()
	}
}

// emptyArray is every empty array's value: nothing can be stored in a
// slice of no length and no capacity, so one serves all documents and
// costs no allocation.
var emptyArray any = []any{}

// array reads an array at its opening bracket. Its elements wait on the
// elements stack until the closing bracket, so that the slice is made at
// its final size once rather than grown.
func (d *decoder) array(depth int) (any, error) {
	if depth > maxDecodeDepth {
		return nil, d.errorf("exceeded max depth")
	}
	d.pos++ // [
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return emptyArray, nil
	}
	base := len(d.elements)
	for {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		d.elements = append(d.elements, v)
		switch closed, err := d.next(']'); {
		case err != nil:
			return nil, err
		case !closed:
			continue
		}
		elements := d.elements[base:]
		arr := make([]any, len(elements))
		copy(arr, elements)
		clear(elements)
		d.elements = d.elements[:base]
		return arr, nil
	}
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? verbatim.
func (d *decoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case d.digits() == 0:
		return nil, d.unexpected()
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if d.digits() == 0 {
			return nil, d.unexpected()
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if d.digits() == 0 {
			return nil, d.unexpected()
		}
	}
	return json.Number(d.data[start:d.pos]), nil
}

func (d *decoder) digits() int {
	start := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	return d.pos - start
}

// key reads a member name, interned when it needs no unescaping.
func (d *decoder) key() (string, error) {
	start := d.pos + 1
	end := start
	for end < len(d.data) && d.data[end] != '"' && d.data[end] != '\\' && d.data[end] >= 0x20 && d.data[end] < utf8.RuneSelf {
		end++
	}
	if end >= len(d.data) || d.data[end] != '"' {
		return d.string()
	}
	d.pos = end + 1
	if k, ok := d.keys[string(d.data[start:end])]; ok {
		return k, nil
	}
	k := string(d.data[start:end])
	if d.keys == nil {
		d.keys = make(map[string]string)
	}
	if len(d.keys) < maxInternedKeys {
		d.keys[k] = k
	}
	return k, nil
}

// string reads a string at its opening quote. One with no escape and
// valid UTF-8 is copied once; any other is rebuilt in buf.
func (d *decoder) string() (string, error) {
	d.pos++ // "
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := d.data[start:d.pos]
			d.pos++
			return string(s), nil
		case c == '\\' || c >= utf8.RuneSelf:
			return d.slowString(start)
		case c < 0x20:
			return "", d.errorf("invalid character %q in string literal", c)
		}
		d.pos++
	}
	return "", errUnexpectedEnd
}

// slowString finishes a string from d.pos, its text from start on.
func (d *decoder) slowString(start int) (string, error) {
	b := append(d.buf[:0], d.data[start:d.pos]...)
	defer func() { d.buf = b[:0] }()
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(b), nil
		case c == '\\':
			var err error
			if b, err = d.escape(b); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", d.errorf("invalid character %q in string literal", c)
		case c < utf8.RuneSelf:
			b = append(b, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, d.data[d.pos:d.pos+size]...)
			}
			d.pos += size
		}
	}
	return "", errUnexpectedEnd
}

// escape appends the character of the escape at d.pos.
func (d *decoder) escape(b []byte) ([]byte, error) {
	if d.pos+1 >= len(d.data) {
		return b, errUnexpectedEnd
	}
	c := d.data[d.pos+1]
	d.pos += 2
	switch c {
	case '"', '\\', '/':
		return append(b, c), nil
	case 'b':
		return append(b, '\b'), nil
	case 'f':
		return append(b, '\f'), nil
	case 'n':
		return append(b, '\n'), nil
	case 'r':
		return append(b, '\r'), nil
	case 't':
		return append(b, '\t'), nil
	case 'u':
		r, err := d.hex4()
		if err != nil {
			return b, err
		}
		if utf16.IsSurrogate(r) {
			// A high surrogate pairs with a low one right after it; a
			// lone one reads as U+FFFD and what follows stands alone.
			if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
				save := d.pos
				d.pos += 2
				low, err := d.hex4()
				if err == nil {
					if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
						return utf8.AppendRune(b, pair), nil
					}
				}
				d.pos = save
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(b, r), nil
	default:
		d.pos--
		return b, d.errorf("invalid escape %q in string literal", c)
	}
}

func (d *decoder) hex4() (rune, error) {
	var r rune
	for range 4 {
		if d.pos >= len(d.data) {
			return 0, errUnexpectedEnd
		}
		c := d.data[d.pos]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, d.errorf("invalid character %q in \\u escape", c)
		}
		r = r<<4 | rune(c)
		d.pos++
	}
	return r, nil
}
