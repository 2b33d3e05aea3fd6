package capture

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

func TestCheckHonest(t *testing.T) {
	const envelope = `"aep":"0.1","id":"e1","time":"2026-07-03T10:14:00Z","source":"aep://h/agent/a","agent":"a","session":"s","seq":1`
	tests := []struct {
		name  string
		event string
		// want is the dishonest path; "-" for an honest event.
		want     string
		wantLvl  aep.Capture
		declared aep.Capture
	}{
		{name: "metadata fields at metadata", event: `{` + envelope + `,"type":"tool.requested","capture":"metadata","data":{"tool":{"name":"Bash"},"args_digest":"ab"}}`, want: "-"},
		{name: "full field at metadata", event: `{` + envelope + `,"type":"tool.requested","capture":"metadata","data":{"tool":{"name":"Bash"},"args":{"command":"ls"}}}`, want: "args", wantLvl: aep.CaptureFull, declared: aep.CaptureMetadata},
		{name: "absent capture is metadata", event: `{` + envelope + `,"type":"run.started","data":{"prompt":"fix it"}}`, want: "prompt", wantLvl: aep.CaptureRedacted, declared: aep.CaptureMetadata},
		{name: "redacted field at redacted", event: `{` + envelope + `,"type":"run.started","capture":"redacted","data":{"prompt":"fix it"}}`, want: "-"},
		{name: "full field at redacted", event: `{` + envelope + `,"type":"tool.requested","capture":"redacted","data":{"tool":{"name":"Bash"},"args":{}}}`, want: "args", wantLvl: aep.CaptureFull, declared: aep.CaptureRedacted},
		{name: "nested redacted field at metadata", event: `{` + envelope + `,"type":"tool.failed","capture":"metadata","data":{"tool":{"name":"Bash"},"error":{"type":"x","message":"boom"}}}`, want: "error.message", wantLvl: aep.CaptureRedacted, declared: aep.CaptureMetadata},
		{name: "a field of array items at metadata", event: `{` + envelope + `,"type":"resource.citation.recorded","capture":"metadata","data":{"citations":[{"source":{"id":"d1"}},{"source":{"id":"d2"},"cited_text":"quoted"}]}}`, want: "citations[].cited_text", wantLvl: aep.CaptureFull, declared: aep.CaptureMetadata},
		{name: "anything at full", event: `{` + envelope + `,"type":"tool.requested","capture":"full","data":{"tool":{"name":"Bash"},"args":{"command":"ls"}}}`, want: "-"},
		{name: "vendor type fields count as metadata", event: `{` + envelope + `,"type":"x.acme.note.added","capture":"metadata","data":{"text":"hello"}}`, want: "-"},
		{name: "unannotated field counts as metadata", event: `{` + envelope + `,"type":"run.started","capture":"metadata","data":{"vendor_ts":"t"}}`, want: "-"},
		{name: "data under none", event: `{` + envelope + `,"type":"run.started","capture":"none","data":{"trigger":"user"}}`, want: "", declared: aep.CaptureNone},
		{name: "empty data under none", event: `{` + envelope + `,"type":"run.started","capture":"none","data":{}}`, want: "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := aep.Parse([]byte(tt.event))
			require.NoError(t, err)
			err = CheckHonest(ev)
			if tt.want == "-" {
				assert.NoError(t, err)
				return
			}
			var dishonest *DishonestError
			require.ErrorAs(t, err, &dishonest)
			assert.Equal(t, tt.want, dishonest.Path)
			assert.Equal(t, tt.wantLvl, dishonest.Level)
			assert.Equal(t, tt.declared, dishonest.Declared)
		})
	}
}

// Every golden event honours its capture, and down-levelling yields
// honest events: the check refuses nothing a conformant hop sends.
func TestCheckHonestPassesGoldenAndDownlevelled(t *testing.T) {
	for _, g := range aeptest.Golden(t) {
		t.Run(g.Name(), func(t *testing.T) {
			require.NoError(t, CheckHonest(g.Event))
			for _, ceiling := range []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted} {
				assert.NoError(t, CheckHonest(Downlevel(g.Event, ceiling)), "ceiling %s", ceiling)
			}
		})
	}
}
