package mapping

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
)

// TestNumbersBeyondFloat64RideAsText: a number no float64 holds (valid
// JSON; Python writes 1e400 and arbitrarily long ints) must not make the
// mapped event unprojectable at any capture level: it rides as the string
// of its digits, and the digest covers the action.
func TestNumbersBeyondFloat64RideAsText(t *testing.T) {
	huge := "1" + strings.Repeat("0", 400)
	raw := `{"kind":"ActionEvent","id":"a1","timestamp":"2026-07-12T10:15:01.000001","source":"agent",` +
		`"tool_name":"terminal","tool_call_id":"c1","action":{"kind":"TerminalAction","command":"ls",` +
		`"timeout":1e400,"limits":[-1E+999,` + huge + `,2.5,1e-400]}}`
	for _, level := range []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull} {
		t.Run(string(level), func(t *testing.T) {
			ev, err := DecodeEvent([]byte(raw))
			require.NoError(t, err)
			assert.Equal(t, 3, ev.NumbersAsText())
			out := newConversation(t, testConfig(level, false)).Map(ev, received)
			require.Equal(t, []string{"tool.requested"}, types(out))
			requireValid(t, out)
			lr := plog.NewLogRecord()
			require.NoError(t, projection.ToLogRecord(out[0], lr, projection.Options{}))
			if level == aep.CaptureNone {
				return
			}
			assert.Contains(t, out[0].Data, "args_digest")
			if level == aep.CaptureMetadata {
				return
			}
			args := out[0].Data[contentField(out[0], "args")].(map[string]any)
			assert.Equal(t, "1e400", args["timeout"])
			assert.Equal(t, []any{"-1E+999", huge, json.Number("2.5"), json.Number("1e-400")}, args["limits"])
		})
	}
}

func TestUndecodableNamesSizeAndReasonNeverContent(t *testing.T) {
	for _, level := range []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull} {
		t.Run(string(level), func(t *testing.T) {
			c := newConversation(t, testConfig(level, false))
			out := feed(t, c, stateEvent(t, "s1", StatusRunning))
			first := c.Undecodable(Undecodable{Size: 1234, Reason: UndecodableFrame}, received)
			second := c.Undecodable(Undecodable{Size: 1234, Reason: UndecodableFrame}, received)
			require.Len(t, first, 1)
			require.Len(t, second, 1)
			ev := first[0]
			assert.Equal(t, "x.openhands.frame.undecodable", ev.Type)
			assert.Equal(t, aep.SeverityWarning, ev.Severity)
			assert.Equal(t, out[0].Run, ev.Run, "inside the open run")
			assert.NotEqual(t, ev.ID, second[0].ID, "each occurrence is an event of its own")
			if level == aep.CaptureNone {
				assert.Nil(t, ev.Data)
			} else {
				assert.Equal(t, map[string]any{"reason": "frame", "size_bytes": json.Number("1234")}, ev.Data)
			}
			requireValid(t, append(append(out, first...), second...))
		})
	}
}
