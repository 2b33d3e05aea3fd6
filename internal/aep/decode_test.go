package aep

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// referenceDecode is what DecodeValue must agree with: encoding/json with
// UseNumber, refusing anything but white space after the value.
func referenceDecode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if rest := raw[dec.InputOffset():]; len(bytes.Trim(rest, " \t\r\n")) > 0 {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// decodeCorpus is every case the differential test and the fuzz target
// start from: valid documents that exercise each branch, and invalid ones
// that must be refused by both.
var decodeCorpus = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `-12.25E-2`, `1E9`, `true`, `false`, `null`,
	` {"a" : [1, 2 ,{"b":null}] } `, "\t\r\n[\n]\n",
	`[[1,[2,3],[]],[],{"a":[4,5,6,7,8,9,[10]],"b":[]},"x"]`,
	`{"a":1,"a":2}`, `1e700`, `-123456789012345678901234567890`,
	`"esc: \" \\ \/ \b \f \n \r \t \u0041 \u00e9 \u20ac \ud83d\ude00"`,
	`"lone: \ud83d x \ude00 \ud83d\u0041 \ud83d\ud83d"`,
	"\"raw utf-8: é € 😀\"", "\"bad utf-8: \xff \xc3 \xed\xa0\x80 end\"",
	`{"kind":"ActionEvent","action":{"command":"ls","n":0.1},"tool_call":{"arguments":"{\"command\":\"ls\"}"},"thought":[]}`,
	// Refused by both.
	``, ` `, `{`, `[`, `"abc`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{1:2}`,
	`[[1,[2,]]]`, `[1,[2,[3`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `tru`, `nul`, `truex`, `{}{}`, `{} x`, `[]]`,
	"\"ctl \x01\"", `"\x"`, `"\u12"`, `"\u12G4"`, `NaN`, `'a'`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

func TestDecodeValueMatchesEncodingJSON(t *testing.T) {
	for _, doc := range decodeCorpus {
		name := doc
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) { assertDecodesAsReference(t, []byte(doc)) })
	}
}

// TestDecodeValueMatchesEncodingJSONOnFixtures runs every JSON file of the
// conformance fixtures and the recorded sessions' shapes through both.
func TestDecodeValueMatchesEncodingJSONOnFixtures(t *testing.T) {
	files, err := filepath.Glob("../../testdata/aep/fixtures/*/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures found: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(file), func(t *testing.T) { assertDecodesAsReference(t, raw) })
	}
}

func FuzzDecodeValue(f *testing.F) {
	for _, doc := range decodeCorpus {
		f.Add([]byte(doc))
	}
	f.Fuzz(assertDecodesAsReference)
}

func assertDecodesAsReference(t *testing.T, raw []byte) {
	want, wantErr := referenceDecode(raw)
	got, err := DecodeValue(raw)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("DecodeValue(%q) error = %v, encoding/json error = %v", raw, err, wantErr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("DecodeValue(%q) = %#v, encoding/json = %#v", raw, got, want)
	}
}

func BenchmarkDecodeValue(b *testing.B) {
	frame := []byte(`{"type":"durable","seq":42,"event":{"action":{"command":"ls","is_input":false,"kind":"TerminalAction","reset":false},"id":"8f6c2f9e-5d1b-4d8e-9a0b-0c3f2b1a7e6d","kind":"ActionEvent","llm_response_id":"chatcmpl-820adf65d2834eb6b52f354c","security_risk":"UNKNOWN","source":"agent","thinking_blocks":[],"thought":[],"timestamp":"2026-12-01T19:20:19.123456","tool_call":{"arguments":"{\"command\":\"ls\",\"is_input\":false,\"reset\":false}","id":"call_05a1d9721c2c4e3f8728ade9","name":"terminal","origin":"completion"},"tool_call_id":"call_05a1d9721c2c4e3f8728ade9","tool_name":"terminal"}}`)
	b.Run("DecodeValue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeValue(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v any
			dec := json.NewDecoder(bytes.NewReader(frame))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDecodeMembersMatchesDecodeValue runs the corpus through both: an
// object's members, the last of each name kept, are DecodeValue's map; a
// valid document that is not an object is ErrNotObject; an invalid one
// is refused by both and hands nothing over.
func TestDecodeMembersMatchesDecodeValue(t *testing.T) {
	for _, doc := range append(decodeCorpus, `{"a":1,"b":[],"a":null}`, ` {"a":{"b":2}} `) {
		want, wantErr := DecodeValue([]byte(doc))
		got := map[string]any{}
		handed := 0
		err := DecodeMembers([]byte(doc), func(name string, value any) {
			got[name] = value
			handed++
		})
		obj, isObject := want.(map[string]any)
		switch {
		case wantErr != nil:
			if err == nil || errors.Is(err, ErrNotObject) || handed > 0 {
				t.Errorf("DecodeMembers(%q) = %v after %d members, DecodeValue refused it: %v", doc, err, handed, wantErr)
			}
		case !isObject:
			if !errors.Is(err, ErrNotObject) || handed > 0 {
				t.Errorf("DecodeMembers(%q) = %v after %d members, want ErrNotObject", doc, err, handed)
			}
		case err != nil || !reflect.DeepEqual(got, obj):
			t.Errorf("DecodeMembers(%q) = %#v, %v; DecodeValue = %#v", doc, got, err, obj)
		}
	}
}
