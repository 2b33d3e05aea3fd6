package schema

import (
	"encoding/json"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// payloadCheck is a payload schema compiled for the few keywords the AEP
// payload schemas use, so that a valid payload is passed without the
// schema library's walk (which formats and parses every number it meets
// through big.Rat). It only ever passes: a payload it does not pass, or
// cannot judge, is judged by the library, which also words the error.
// So the one thing it must never do is pass a payload the library fails
// (payload_test.go holds it to that).
type payloadCheck struct {
	types      typeSet
	enum       []string // nil: no enum; the schemas' enums are all strings
	constant   *string
	format     func(any) error
	required   []string
	properties map[string]*payloadCheck
	items      *payloadCheck
	minimum    *bound
	maximum    *bound
	// ifSchema and then are the schema's conditional: ifSchema keeps the
	// library's schema too, since skipping then takes an exact "fails".
	ifSchema *conditionSchema
	then     *payloadCheck
}

type conditionSchema struct {
	check   *payloadCheck
	library *jsonschema.Schema
}

// holds is the exact verdict of the conditional's if.
func (c *conditionSchema) holds(v any) bool {
	return c.check.passes(v) || c.library.Validate(v) == nil
}

// typeSet is the schema's type keyword as a set of JSON types.
type typeSet uint8

const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

var typeNames = map[string]typeSet{
	"null": typeNull, "boolean": typeBoolean, "number": typeNumber, "integer": typeInteger,
	"string": typeString, "array": typeArray, "object": typeObject,
}

// bound is a minimum or maximum, with its int64 form when it has one.
type bound struct {
	rat   *big.Rat
	int   int64
	isInt bool
}

func newBound(r *big.Rat) *bound {
	b := &bound{rat: r}
	if r.IsInt() && r.Num().IsInt64() {
		b.int, b.isInt = r.Num().Int64(), true
	}
	return b
}

// compare compares a number literal with the bound as the library does
// (big.Rat); ok is false where the literal is no rational it can read.
func (b *bound) compare(lit string) (cmp int, ok bool) {
	if b.isInt {
		if n, ok := plainInt64(lit); ok {
			switch {
			case n < b.int:
				return -1, true
			case n > b.int:
				return 1, true
			}
			return 0, true
		}
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return 0, false
	}
	return r.Cmp(b.rat), true
}

// plainInt64 reads a literal of at most 18 digits and an optional minus
// sign, the form every integer the receiver writes has.
func plainInt64(lit string) (int64, bool) {
	digits := strings.TrimPrefix(lit, "-")
	if digits == "" || len(digits) > 18 || !all(digits, isDigit) {
		return 0, false
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	return n, err == nil
}

// compilePayload compiles a payload schema, or returns false when the
// schema uses a keyword payloadCheck does not know: that schema stays
// with the library.
func compilePayload(s *jsonschema.Schema) (*payloadCheck, bool) {
	if !onlyKnownKeywords(s) {
		return nil, false
	}
	c := &payloadCheck{required: s.Required}
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			c.types |= typeNames[name]
		}
	}
	if s.Enum != nil {
		c.enum = []string{}
		for _, v := range s.Enum.Values {
			str, ok := v.(string)
			if !ok {
				return nil, false
			}
			c.enum = append(c.enum, str)
		}
	}
	if s.Const != nil {
		str, ok := (*s.Const).(string)
		if !ok {
			return nil, false
		}
		c.constant = &str
	}
	if s.Format != nil {
		if s.Format.Name == "regex" { // the library may judge it with another engine
			return nil, false
		}
		c.format = s.Format.Validate
	}
	if s.Minimum != nil {
		c.minimum = newBound(s.Minimum)
	}
	if s.Maximum != nil {
		c.maximum = newBound(s.Maximum)
	}
	if len(s.Properties) > 0 {
		c.properties = make(map[string]*payloadCheck, len(s.Properties))
		for name, sub := range s.Properties {
			p, ok := compilePayload(sub)
			if !ok {
				return nil, false
			}
			c.properties[name] = p
		}
	}
	var ok bool
	if c.items, ok = compileSubschema(s.Items2020); !ok {
		return nil, false
	}
	if c.then, ok = compileSubschema(s.Then); !ok {
		return nil, false
	}
	if s.If != nil {
		check, ok := compilePayload(s.If)
		if !ok {
			return nil, false
		}
		c.ifSchema = &conditionSchema{check: check, library: s.If}
	}
	return c, true
}

// compileSubschema is compilePayload of a keyword's schema, nil when the
// keyword is absent.
func compileSubschema(s *jsonschema.Schema) (*payloadCheck, bool) {
	if s == nil {
		return nil, true
	}
	return compilePayload(s)
}

// knownKeywords are the Schema fields compilePayload reads, or that do
// not take part in validation (identity, location, annotations).
var knownKeywords = map[string]bool{
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true,
	"RecursiveAnchor": true, "DynamicAnchor": true,
	"Types": true, "Enum": true, "Const": true, "Format": true, "If": true, "Then": true,
	"Required": true, "Properties": true, "Items2020": true, "Minimum": true, "Maximum": true,
	"Title": true, "Description": true, "Default": true, "Comment": true,
	"ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
}

// onlyKnownKeywords reports whether every other exported field of s is
// unset. It reads the fields by reflection so that a keyword the library
// adds later sends its schema to the library instead of being ignored.
func onlyKnownKeywords(s *jsonschema.Schema) bool {
	v := reflect.ValueOf(s).Elem()
	for _, f := range reflect.VisibleFields(v.Type()) {
		if f.IsExported() && !knownKeywords[f.Name] && !v.FieldByIndex(f.Index).IsZero() {
			return false
		}
	}
	return true
}

// passes reports that v is valid; false means invalid or not judged here.
func (c *payloadCheck) passes(v any) bool {
	var t typeSet
	switch x := v.(type) {
	case nil:
		t = typeNull
	case bool:
		t = typeBoolean
	case string:
		t = typeString
	case json.Number:
		t = typeNumber
		if c.types&typeInteger != 0 && c.types&typeNumber == 0 {
			if integer, _ := numberLiteral(string(x)); integer {
				t = typeInteger
			}
		}
	case []any:
		t = typeArray
	case map[string]any:
		t = typeObject
	default:
		return false // not what decoding JSON yields
	}
	if c.types != 0 && c.types&t == 0 {
		return false
	}
	if c.enum != nil || c.constant != nil {
		s, ok := v.(string)
		if !ok || c.enum != nil && !slices.Contains(c.enum, s) || c.constant != nil && s != *c.constant {
			return false
		}
	}
	if c.format != nil && c.format(v) != nil {
		return false
	}
	switch x := v.(type) {
	case json.Number:
		if !within(string(x), c.minimum, c.maximum) {
			return false
		}
	case map[string]any:
		for _, name := range c.required {
			if _, ok := x[name]; !ok {
				return false
			}
		}
		for name, p := range c.properties {
			if val, ok := x[name]; ok && !p.passes(val) {
				return false
			}
		}
	case []any:
		if c.items != nil {
			for _, item := range x {
				if !c.items.passes(item) {
					return false
				}
			}
		}
	}
	return c.ifSchema == nil || c.then == nil || !c.ifSchema.holds(v) || c.then.passes(v)
}

// within reports that a number literal is at least minimum and at most
// maximum (either may be nil).
func within(lit string, minimum, maximum *bound) bool {
	if minimum != nil {
		if cmp, ok := minimum.compare(lit); !ok || cmp < 0 {
			return false
		}
	}
	if maximum != nil {
		if cmp, ok := maximum.compare(lit); !ok || cmp > 0 {
			return false
		}
	}
	return true
}
