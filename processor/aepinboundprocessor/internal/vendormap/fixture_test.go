package vendormap

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

// fixtureEntry is one record of codex-otel.json or vscode-otel.json.
type fixtureEntry struct {
	Input     json.RawMessage `json:"input"`
	Companion json.RawMessage `json:"companion"`
	Primary   json.RawMessage `json:"primary"`
}

type fixtureFile struct {
	Identity struct {
		SessionFrom string `json:"session_from"`
	} `json:"identity"`
	Records map[string]fixtureEntry `json:"records"`
	Unknown fixtureEntry            `json:"unknown"`
}

var fixtureFiles = map[Vendor]string{Codex: "codex-otel.json", VSCode: "vscode-otel.json"}

func loadFixture(t *testing.T, v Vendor) fixtureFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", fixtureFiles[v]))
	require.NoError(t, err)
	var f fixtureFile
	require.NoError(t, json.Unmarshal(raw, &f))
	require.NotEmpty(t, f.Records)
	return f
}

// fixtureRecord decodes a fixture input ({resource, attributes}) with
// numbers as json.Number, as FromLogRecord yields them.
func fixtureRecord(t *testing.T, input json.RawMessage) Record {
	t.Helper()
	decoded, err := aep.DecodeValue(input)
	require.NoError(t, err)
	doc := decoded.(map[string]any)
	rec := Record{}
	rec.Resource, _ = doc["resource"].(map[string]any)
	rec.Attributes, _ = doc["attributes"].(map[string]any)
	return rec
}

// pinnedShape is what the fixtures pin of an event: type, data, subject.
func pinnedShape(m Mapped) map[string]any {
	shape := map[string]any{"type": m.Type, "data": m.Data}
	if m.Subject != "" {
		shape["subject"] = m.Subject
	}
	return shape
}

func canonical(t *testing.T, v any) string {
	t.Helper()
	raw, err := aep.Canonical(v)
	require.NoError(t, err)
	return string(raw)
}

// requirePinned compares type, data and subject exactly ($comment aside)
// and checks the event is schema-valid inside an envelope.
func requirePinned(t *testing.T, expected json.RawMessage, got Mapped, ok bool) {
	t.Helper()
	if string(expected) == "null" {
		require.False(t, ok, "expected nothing, got %s", got.Type)
		return
	}
	require.True(t, ok)
	want, err := aep.DecodeValue(expected)
	require.NoError(t, err)
	delete(want.(map[string]any), "$comment")
	assert.Equal(t, canonical(t, want), canonical(t, pinnedShape(got)))
	assert.Equal(t, aep.CaptureMetadata, got.Capture)
	require.NoError(t, schema.Validate(envelope(got)))
}

func envelope(m Mapped) *aep.Event {
	return &aep.Event{
		AEP: aep.Version, ID: "01JAAAAAAAAAAAAAAAAAAAAAAA", Type: m.Type, Subject: m.Subject,
		Time: "2026-12-02T00:00:00Z", Source: "aep://otelcol/agent/x/session/s", Agent: "x",
		Session: "s", Seq: aep.Int64(0), Epoch: aep.Int64(1), Capture: m.Capture, Data: m.Data,
	}
}

// TestFixtures pins every entry of both fixtures, in both modes, at the
// metadata ceiling, and the identity each fixture names.
func TestFixtures(t *testing.T) {
	for _, v := range Vendors {
		f := loadFixture(t, v)
		entries := fixtureEntries(f)
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			entry := entries[name]
			rec := fixtureRecord(t, entry.Input)
			t.Run(string(v)+"/"+name+"/identity", func(t *testing.T) {
				got, ok := Classify(rec, Vendors)
				require.True(t, ok)
				require.Equal(t, v, got)
				from, fromResource := strings.CutPrefix(f.Identity.SessionFrom, "resource:")
				attrs := rec.Attributes
				if fromResource {
					attrs = rec.Resource
				}
				require.NotEmpty(t, attrs[from])
				require.Equal(t, attrs[from], Session(v, rec))
			})
			for _, mode := range []struct {
				mode     Mode
				expected json.RawMessage
			}{{ModeCompanion, entry.Companion}, {ModePrimary, entry.Primary}} {
				t.Run(string(v)+"/"+name+"/"+string(mode.mode), func(t *testing.T) {
					got, ok := Map(v, rec, Options{Mode: mode.mode})
					requirePinned(t, mode.expected, got, ok)
				})
			}
		}
	}
}

// fixtureEntries lists a fixture's entries by subtest name; the fallback is
// "unknown".
func fixtureEntries(f fixtureFile) map[string]fixtureEntry {
	out := make(map[string]fixtureEntry, len(f.Records)+1)
	for name, e := range f.Records {
		out[name] = e
	}
	out["unknown"] = f.Unknown
	return out
}
