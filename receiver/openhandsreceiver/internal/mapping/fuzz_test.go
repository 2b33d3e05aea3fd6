package mapping

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The seed corpora under testdata/fuzz hold every fixture input (FuzzMap:
// also all of them as one conversation, and a walk through every pinned
// status transition).

func FuzzDecodeEvent(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := DecodeEvent(raw)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidEvent)
			return
		}
		require.NotEmpty(t, ev.Kind())
		require.NotEmpty(t, ev.ID())
		c := newConversation(t, testConfig(aep.CaptureFull, true))
		requireWellFormed(t, c.Map(ev, received))
	})
}

// FuzzMap feeds newline-separated frames to one conversation, then ends it.
func FuzzMap(f *testing.F) {
	f.Fuzz(func(t *testing.T, frames []byte) {
		c := newConversation(t, testConfig(aep.CaptureRedacted, true))
		var out []*aep.Event
		for _, raw := range bytes.Split(frames, []byte("\n")) {
			if ev, err := DecodeEvent(raw); err == nil {
				out = append(out, c.Map(ev, received)...)
			}
		}
		out = append(out, c.End(received, "")...)
		requireWellFormed(t, out)
		requireLifecycle(t, out)
		require.Equal(t, typeSessionEnded, out[len(out)-1].Type)
	})
}

func requireWellFormed(t *testing.T, evs []*aep.Event) {
	t.Helper()
	requireValid(t, evs)
	for _, ev := range evs {
		require.Regexp(t, typeSyntax, ev.Type)
		require.Len(t, ev.ID, 26)
		_, err := json.Marshal(ev)
		require.NoError(t, err)
	}
}

// BenchmarkDecodeAndMap decodes and maps every fixture input through one
// conversation per iteration (deltas on, capture redacted).
// BenchmarkDecodeAndMap measures vendor frames decoded and mapped per
// second on one core, over every fixture input, at the default posture
// (metadata) and with content on (redacted, deltas).
func BenchmarkDecodeAndMap(b *testing.B) {
	f := loadFixture(b)
	cases := fixtureCases(f)
	for _, posture := range []struct {
		name   string
		level  aep.Capture
		deltas bool
	}{{"metadata", aep.CaptureMetadata, false}, {"redacted+deltas", aep.CaptureRedacted, true}} {
		b.Run(posture.name, func(b *testing.B) {
			cfg := testConfig(posture.level, posture.deltas)
			b.ReportAllocs()
			events := 0
			for b.Loop() {
				c, err := NewConversation(cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, tc := range cases {
					ev, err := DecodeEvent(tc.Input)
					if err != nil {
						b.Fatal(err)
					}
					events += len(c.Map(ev, received))
				}
			}
			frames := float64(b.N * len(cases))
			b.ReportMetric(frames/b.Elapsed().Seconds(), "frames/s")
			b.ReportMetric(float64(events)/frames, "aep_events/frame")
		})
	}
}
