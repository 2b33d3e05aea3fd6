package capture

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

// downlevelCase is one case of downlevel/cases.json. Unknown keys fail the
// decode, so a case that grows a new expectation cannot pass unchecked.
type downlevelCase struct {
	Name          string          `json:"name"`
	Ceiling       aep.Capture     `json:"ceiling"`
	Event         json.RawMessage `json:"event"`
	ExpectCapture aep.Capture     `json:"expect_capture"`
	ExpectData    json.RawMessage `json:"expect_data"`
}

func loadDownlevelCases(t testing.TB) []downlevelCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(aeptest.FixturesDir(t), "downlevel", "cases.json"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var file struct {
		Comment string          `json:"$comment"`
		Cases   []downlevelCase `json:"cases"`
	}
	require.NoError(t, dec.Decode(&file), "downlevel/cases.json")
	require.NotEmpty(t, file.Cases)
	return file.Cases
}

func TestDownlevelCorpus(t *testing.T) {
	for _, c := range loadDownlevelCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			ev, err := aep.Parse(c.Event)
			require.NoError(t, err)
			before, err := json.Marshal(ev)
			require.NoError(t, err)

			out := Downlevel(ev, c.Ceiling)

			assert.Equal(t, c.ExpectCapture, out.EffectiveCapture())
			want, err := aep.DecodeValue(c.ExpectData)
			require.NoError(t, err)
			if want == nil {
				assert.Nil(t, out.Data)
			} else {
				assert.Equal(t, want, out.Data)
			}
			envelope := *out
			envelope.Capture, envelope.Data = ev.Capture, ev.Data
			assert.Equal(t, *ev, envelope, "only capture and data may change")
			after, err := json.Marshal(ev)
			require.NoError(t, err)
			assert.JSONEq(t, string(before), string(after), "the input event must not change")
			assertHonorsCapture(t, out)
			assert.Same(t, out, Downlevel(out, c.Ceiling), "down-levelling twice changes nothing")
		})
	}
}

// assertHonorsCapture checks AEP-0001 §8.2a on a result: no field annotated
// above the event's capture survives.
func assertHonorsCapture(t *testing.T, ev *aep.Event) {
	t.Helper()
	paths, ok := Annotations(ev.Type)
	if !ok {
		if ev.EffectiveCapture() != aep.CaptureFull {
			assert.Nil(t, ev.Data, "a type without a schema keeps data only at full")
		}
		return
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				p := k
				if at != "" {
					p = at + "." + k
				}
				if a, ok := paths[p]; ok {
					assert.True(t, ev.EffectiveCapture().Allows(a.Level), "%s (%s) rides at %s", p, a.Level, ev.EffectiveCapture())
				}
				walk(child, p)
			}
		case []any:
			for _, item := range x {
				walk(item, at+"[]")
			}
		}
	}
	walk(ev.Data, "")
}

var allLevels = []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull}

// sampleEvent is a tool.completed whose data honors capture.
func sampleEvent(capture aep.Capture) *aep.Event {
	ev := &aep.Event{
		AEP: aep.Version, ID: "E1", Type: "tool.completed", Subject: "Bash",
		Time: "2026-07-03T10:00:00Z", Source: "aep://h/agent/a", Agent: "a",
		Session: "s1", Seq: aep.Int64(1), Capture: capture,
		Extensions: map[string]any{"vendor": "x"},
		Data: map[string]any{
			"tool":            map[string]any{"name": "Bash", "call_id": "t1"},
			"status":          "success",
			"result":          "verbatim",
			"result_redacted": "redacted text",
			"result_digest":   "ad5c679d78b027a0fe8f7592a602326e",
			"duration_ms":     json.Number("12"),
		},
	}
	switch ev.EffectiveCapture() {
	case aep.CaptureNone:
		ev.Data = nil
	case aep.CaptureMetadata:
		delete(ev.Data, "result_redacted")
		fallthrough
	case aep.CaptureRedacted:
		delete(ev.Data, "result")
	}
	return ev
}

func TestDownlevelNeverUpLevels(t *testing.T) {
	for _, from := range allLevels {
		for _, ceiling := range allLevels {
			t.Run(string(from)+" under "+string(ceiling), func(t *testing.T) {
				ev := sampleEvent(from)
				out := Downlevel(ev, ceiling)
				assert.LessOrEqual(t, out.EffectiveCapture().Rank(), min(from.Rank(), ceiling.Rank()))
				if ceiling.Rank() >= from.Rank() {
					assert.Same(t, ev, out, "nothing to lower: the event itself comes back")
				}
				assertHonorsCapture(t, out)
			})
		}
	}
}

func TestDownlevelFullUnderRedactedCeilingGivesMetadata(t *testing.T) {
	out := Downlevel(sampleEvent(aep.CaptureFull), aep.CaptureRedacted)
	assert.Equal(t, aep.CaptureMetadata, out.Capture)
	assert.Equal(t, map[string]any{
		"tool":          map[string]any{"name": "Bash", "call_id": "t1"},
		"status":        "success",
		"result_digest": "ad5c679d78b027a0fe8f7592a602326e",
		"duration_ms":   json.Number("12"),
	}, out.Data)
	assert.Equal(t, map[string]any{"vendor": "x"}, out.Extensions)
}

func TestDownlevelVendorTypeLosesDataWholesale(t *testing.T) {
	ev := sampleEvent(aep.CaptureRedacted)
	ev.Type = "x.openhands.agent.condensation"
	out := Downlevel(ev, aep.CaptureMetadata)
	assert.Equal(t, aep.CaptureMetadata, out.Capture)
	assert.Nil(t, out.Data)
	assert.NotNil(t, ev.Data, "the input keeps its data")

	ev.Capture = aep.CaptureMetadata
	assert.Same(t, ev, Downlevel(ev, aep.CaptureMetadata), "at its own level a vendor event passes whole")
}

func TestDownlevelNilEvent(t *testing.T) {
	assert.Nil(t, Downlevel(nil, aep.CaptureNone))
}

func TestDownlevelCeilingNoneKeepsTheEnvelope(t *testing.T) {
	ev := sampleEvent("")
	out := Downlevel(ev, aep.CaptureNone)
	assert.Equal(t, aep.CaptureNone, out.Capture)
	assert.Nil(t, out.Data)
	assert.Equal(t, ev.ID, out.ID)
}

func TestDownlevelUnknownLevels(t *testing.T) {
	out := Downlevel(sampleEvent(aep.CaptureFull), "bogus")
	assert.NotContains(t, out.Data, "result_redacted")
	assert.Equal(t, aep.CaptureMetadata, out.Capture, "an unknown ceiling counts as metadata")

	ev := sampleEvent(aep.CaptureFull)
	ev.Capture = "bogus"
	out = Downlevel(ev, aep.CaptureRedacted)
	assert.Equal(t, aep.CaptureMetadata, out.Capture, "an unknown capture counts as full")
	assert.NotContains(t, out.Data, "result_redacted")
}

func attentionEvent(subject string, data map[string]any) *aep.Event {
	return &aep.Event{
		AEP: aep.Version, ID: "A1", Type: "attention.requested", Subject: subject,
		Time: "2026-07-03T10:00:00Z", Source: "aep://h/agent/oh", Agent: "openhands",
		Session: "s1", Seq: aep.Int64(1), Capture: aep.CaptureRedacted, Data: data,
	}
}

func TestDownlevelMetadataSynthesis(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		data    map[string]any
		want    map[string]any
	}{
		{
			name: "prompt without subject or kind",
			data: map[string]any{"prompt": "Run rm -rf /?"},
			want: map[string]any{"prompt": "openhands requests attention"},
		},
		{
			name:    "label without id falls back to the 1-based index",
			subject: "Bash",
			data: map[string]any{"kind": "permission", "prompt": "Allow?", "options": []any{
				map[string]any{"label": "Allow once"}, map[string]any{"id": "", "label": "Deny"},
			}},
			want: map[string]any{"kind": "permission", "prompt": "openhands requests permission: Bash", "options": []any{
				map[string]any{"label": "1"}, map[string]any{"id": "", "label": "2"},
			}},
		},
		{
			name: "a field whose shape contradicts the schema is dropped",
			data: map[string]any{"kind": "input", "prompt": "x", "options": "free text", "fields": []any{"not an object"}},
			want: map[string]any{"kind": "input", "prompt": "openhands requests input", "fields": []any{}},
		},
		{
			name: "unannotated vendor fields ride as metadata",
			data: map[string]any{"kind": "input", "prompt": "x", "vendor_event_id": "ev-1"},
			want: map[string]any{"kind": "input", "prompt": "openhands requests input", "vendor_event_id": "ev-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := Downlevel(attentionEvent(tt.subject, tt.data), aep.CaptureMetadata)
			assert.Equal(t, tt.want, out.Data)
		})
	}
}

func TestDownlevelAnswerValuesNotAnObject(t *testing.T) {
	ev := &aep.Event{
		AEP: aep.Version, ID: "A2", Type: "attention.answered", Time: "2026-07-03T10:00:00Z",
		Source: "aep://h/agent/a", Agent: "a", Session: "s1", Seq: aep.Int64(2), Capture: aep.CaptureFull,
		Data: map[string]any{"answer": map[string]any{"option": "1", "values": "free text"}},
	}
	out := Downlevel(ev, aep.CaptureMetadata)
	assert.Equal(t, map[string]any{"answer": map[string]any{"option": "1"}}, out.Data)
}

func BenchmarkDownlevel(b *testing.B) {
	var ev *aep.Event
	for _, c := range loadDownlevelCases(b) {
		if strings.HasPrefix(c.Name, "attention.requested kind=form") {
			var err error
			ev, err = aep.Parse(c.Event)
			require.NoError(b, err)
		}
	}
	require.NotNil(b, ev)
	b.ReportAllocs()
	for b.Loop() {
		Downlevel(ev, aep.CaptureMetadata)
	}
}

func TestDownlevelConcurrentUse(t *testing.T) {
	ev := attentionEvent("Bash", map[string]any{"kind": "permission", "prompt": "Allow rm?", "options": []any{
		map[string]any{"id": "allow", "label": "Allow"},
	}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			out := Downlevel(ev, aep.CaptureMetadata)
			assert.Equal(t, "openhands requests permission: Bash", out.Data["prompt"])
		})
	}
	wg.Wait()
	assert.Equal(t, "Allow rm?", ev.Data["prompt"])
}

// TestPruneDropsUnknownExceptionFields covers a [metadata*] field no
// degrade rule knows, and walks a $ref'd object.
func TestPruneDropsUnknownExceptionFields(t *testing.T) {
	ta, err := parseTypeSchema([]byte(`{
	  "$defs": {"note": {"type": "object", "properties": {
	    "id": {"type": "string", "x-aep-capture": "metadata"},
	    "body": {"type": "string", "x-aep-capture": "redacted"}}}},
	  "properties": {
	    "hint": {"type": "string", "x-aep-capture": "metadata", "$comment": "metadata-gated by exception"},
	    "note": {"$ref": "#/$defs/note"}
	  }
	}`))
	require.NoError(t, err)
	ev := &aep.Event{Agent: "a", Capture: aep.CaptureRedacted}
	p := pruner{ev: ev, to: aep.CaptureMetadata, structural: true}
	got := p.object(map[string]any{
		"hint": "model text",
		"note": map[string]any{"id": "n1", "body": "model text"},
	}, ta.root, -1)
	assert.Equal(t, map[string]any{"note": map[string]any{"id": "n1"}}, got)
}
