package mapping

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestOversizeNamesTheEventNeverItsContent(t *testing.T) {
	for _, level := range []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull} {
		t.Run(string(level), func(t *testing.T) {
			c := newConversation(t, testConfig(level, false))
			out := feed(t, c, stateEvent(t, "s1", StatusRunning))
			stand := c.Oversize(Oversize{
				ID: "7d19b431-d776-44aa-85b4-b913e7d0e42b", Kind: "MessageEvent",
				Timestamp: "2026-07-12T10:15:01.000001", Size: 20 << 20, Limit: 16 << 20,
			}, received)
			require.Len(t, stand, 1)
			ev := stand[0]
			assert.Equal(t, "x.openhands.event.oversize", ev.Type)
			assert.Equal(t, aep.SeverityWarning, ev.Severity)
			assert.Equal(t, out[0].Run, ev.Run, "inside the open run")
			if level == aep.CaptureNone {
				assert.Nil(t, ev.Data)
			} else {
				assert.Equal(t, map[string]any{
					"vendor_event_id": "7d19b431-d776-44aa-85b4-b913e7d0e42b", "vendor_ts": "2026-07-12T10:15:01.000001",
					"vendor_kind": "MessageEvent", "size_bytes": json.Number("20971520"), "limit_bytes": json.Number("16777216"),
				}, ev.Data)
			}
			requireValid(t, append(out, stand...))

			again := newConversation(t, testConfig(level, false))
			feed(t, again, stateEvent(t, "s1", StatusRunning))
			assert.Equal(t, ev.ID, again.Oversize(Oversize{
				ID: "7d19b431-d776-44aa-85b4-b913e7d0e42b", Timestamp: "2026-07-12T10:15:01.000001",
			}, received)[0].ID, "the id derives from the vendor event")
		})
	}
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	ev := c.Oversize(Oversize{ID: "x", Kind: "<script>whatever a server sends</script>"}, received)[0]
	assert.NotContains(t, ev.Data, "vendor_kind", "only a known kind rides")
}
