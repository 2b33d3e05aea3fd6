package projection

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schemas"
)

// TestEventNameOfEveryType: a type the registry lists, every one with a
// payload schema among them, is named from the table without building
// its name; any other type's name is built; each is the prefix and the
// type.
func TestEventNameOfEveryType(t *testing.T) {
	files, err := fs.Glob(schemas.FS, "types/*.schema.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		typ := strings.TrimSuffix(strings.TrimPrefix(file, "types/"), ".schema.json")
		require.Contains(t, eventNames, typ, "a type with a payload schema is registered")
	}
	for typ := range eventNames {
		require.Equal(t, EventNamePrefix+typ, eventName(typ))
		require.Zero(t, testing.AllocsPerRun(10, func() { _ = eventName(typ) }), typ)
	}
	for _, typ := range []string{"x.openhands.conversation.message", "x.acme.thing", ""} {
		require.Equal(t, EventNamePrefix+typ, eventName(typ))
	}
}

// TestAttributeCountIsWhatIsPut: the attributes are made at the size the
// projection fills, for every golden event under every gate, and for the
// extras and extensions the golden events lack.
func TestAttributeCountIsWhatIsPut(t *testing.T) {
	events := goldenEvents(t)
	for _, mutate := range []func(*aep.Event){
		func(e *aep.Event) { e.Severity, e.Capture = "", "" },
		func(e *aep.Event) { e.Time = "2026-07-03T12:15:04.221+02:00" },
		func(e *aep.Event) { e.Traceparent = "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
		func(e *aep.Event) { e.Data = map[string]any{} },
		func(e *aep.Event) { e.Data = map[string]any{"gen_ai.request.model": "m", "text": "t"} },
		func(e *aep.Event) { e.Extensions = map[string]any{"acmeregion": "eu-1", "acmetest": true} },
	} {
		ev := *events[3]
		mutate(&ev)
		events = append(events, &ev)
	}
	for _, maxCapture := range []aep.Capture{"", aep.CaptureMetadata, aep.CaptureFull} {
		for i, ev := range events {
			lr := plog.NewLogRecord()
			require.NoError(t, ToLogRecord(ev, lr, Options{MaxCapture: maxCapture}))
			attrs := lr.Attributes()
			_, wireTime := attrs.Get(WireTime)
			_, wireTraceparentVersion := attrs.Get(WireTraceparentVersion)
			gated := maxCapture != "" && ev.EffectiveCapture().Rank() > maxCapture.Rank()
			require.Equal(t, attrs.Len(), attributeCount(ev, gated, wireTime, wireTraceparentVersion),
				"event %d (%s) under max capture %q", i, ev.Type, maxCapture)
		}
	}
}
