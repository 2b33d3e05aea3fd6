package logevent

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
)

// TestConvert: a record comes back as its event's wire form, or as a
// rejection that says why and, once the event could be rebuilt, which.
func TestConvert(t *testing.T) {
	golden := aeptest.Golden(t)
	full := golden[0].Event.Clone()
	full.Capture = aep.CaptureFull
	invalid := golden[0].Event.Clone()
	invalid.Seq = nil // a session-scoped event needs a seq
	tests := []struct {
		name       string
		event      *aep.Event // nil: a record that is not an AEP event
		converter  Converter
		wantReason string
		wantNotAEP bool
		wantEvent  bool // the rejection names the event
		// wantCapture is the wire event's capture.
		wantCapture aep.Capture
	}{
		{name: "valid", event: full, wantCapture: aep.CaptureFull},
		{name: "not_aep", wantReason: ReasonProjection, wantNotAEP: true},
		{name: "invalid", event: invalid, wantReason: ReasonInvalid, wantEvent: true},
		{name: "ceiling", event: full, converter: Converter{Ceiling: aep.CaptureMetadata}, wantCapture: aep.CaptureMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := plog.NewLogRecord()
			if tt.event != nil {
				require.NoError(t, projection.ToLogRecord(tt.event, lr, projection.Options{}))
			} else {
				lr.SetEventName("app.request")
			}
			ev, raw, rejected := tt.converter.Convert(lr, pcommon.NewResource())
			if tt.wantReason != "" {
				require.NotNil(t, rejected)
				assert.Equal(t, tt.wantReason, rejected.Reason)
				assert.Equal(t, tt.wantNotAEP, errors.Is(rejected.Err, projection.ErrNotAEP))
				assert.Equal(t, tt.wantEvent, rejected.Event != nil)
				assert.Nil(t, raw)
				return
			}
			require.Nil(t, rejected)
			got, err := aep.Parse(raw)
			require.NoError(t, err)
			assert.Equal(t, tt.wantCapture, got.Capture)
			assert.Equal(t, tt.event.ID, got.ID)
			assert.Equal(t, got.ID, ev.ID, "the event returned is the one on the wire")
		})
	}
}

// BenchmarkConvert measures one record back to its wire form, on the
// golden stream's tool events as the openhands receiver projects them.
func BenchmarkConvert(b *testing.B) {
	for _, line := range aeptest.Golden(b)[2:4] { // tool.requested, tool.completed
		lr := plog.NewLogRecord()
		require.NoError(b, projection.ToLogRecord(line.Event, lr, projection.Options{}))
		res := pcommon.NewResource()
		_, _, rejected := (Converter{}).Convert(lr, res) // compile the schemas outside the timer
		require.Nil(b, rejected)
		b.Run(line.Event.Type, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, rejected := (Converter{}).Convert(lr, res); rejected != nil {
					b.Fatal(rejected.Err)
				}
			}
		})
		b.Run(line.Event.Type+"/into", func(b *testing.B) { // as the aeprelay exporter converts
			b.ReportAllocs()
			for b.Loop() {
				var ev aep.Event
				if _, rejected := (Converter{}).ConvertInto(lr, &ev); rejected != nil {
					b.Fatal(rejected.Err)
				}
			}
		})
	}
}

// TestConvertInto: the event rebuilt into the caller's is the one Convert
// returns, and a rejection holds a copy of it, so that the caller's may
// stay on its stack.
func TestConvertInto(t *testing.T) {
	golden := aeptest.Golden(t)
	lr := plog.NewLogRecord()
	require.NoError(t, projection.ToLogRecord(golden[3].Event, lr, projection.Options{}))
	want, wantRaw, rejected := Converter{}.Convert(lr, pcommon.NewResource())
	require.Nil(t, rejected)
	var ev aep.Event
	raw, rejected := Converter{}.ConvertInto(lr, &ev)
	require.Nil(t, rejected)
	assert.Equal(t, *want, ev)
	assert.Equal(t, string(wantRaw), string(raw))

	invalid := golden[3].Event.Clone()
	invalid.Seq = nil // a session-scoped event needs a seq
	require.NoError(t, projection.ToLogRecord(invalid, lr, projection.Options{}))
	_, rejected = Converter{}.ConvertInto(lr, &ev)
	require.NotNil(t, rejected)
	assert.Equal(t, ReasonInvalid, rejected.Reason)
	assert.Equal(t, ev, *rejected.Event)
	assert.NotSame(t, &ev, rejected.Event)
}
