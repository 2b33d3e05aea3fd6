package openhandsreceiver

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// undecodableFrames are frames no event can be read from, as each socket
// carries them: a NaN (Python's json writes it; JSON has none), 100,000
// levels of nesting, and on the session socket a seq beyond float64 range.
// Each carries a marker that must never leave the receiver.
func undecodableFrames(socket string) [][]byte {
	nan := []byte(`{"kind":"MessageEvent","id":"` + oh.NewUUID() + `","source":"agent","marker":"UNDECODABLE-CONTENT","x":NaN}`)
	deep := []byte(`{"kind":"MessageEvent","id":"UNDECODABLE-CONTENT","x":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`)
	if socket == socketEvents {
		return [][]byte{nan, deep}
	}
	durable := func(seq string, ev []byte) []byte {
		return []byte(`{"type":"durable","seq":` + seq + `,"event":` + string(ev) + `}`)
	}
	return [][]byte{
		durable("100000", nan),
		durable("100001", deep),
		durable("1e400", []byte(oh.UnknownKindFrame())),
	}
}

// TestUndecodableInputIsVisibleAndTakesNoSeq: a number beyond float64
// range in a payload rides as text at every capture level (it used to make
// the projection refuse the mapped event after it took a seq), and a frame
// that cannot be decoded becomes x.openhands.frame.undecodable naming its
// size, never its content. No seq is skipped.
func TestUndecodableInputIsVisibleAndTakesNoSeq(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		for _, level := range []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull} {
			t.Run(string(level), func(t *testing.T) {
				stub := startStub(t)
				conv := createConversation(t, stub)
				cfg := fastConfig(socket, stub)
				cfg.Capture.Level = level
				h := startHarness(t, cfg)
				h.waitLive(conv, 1)

				mustStatus(t, conv, oh.StatusRunning)
				action := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{Action: map[string]any{
					"kind": "TerminalAction", "command": "ls", "timeout": json.Number("1e400"),
				}}))
				frames := undecodableFrames(socket)
				for _, f := range frames {
					require.Equal(t, 1, conv.InjectFrame(endpointOf(socket), f))
				}
				message := mustAppend(t, conv, oh.MessageEvent("agent", "after the bad frames"))
				mustStatus(t, conv, oh.StatusFinished)
				got := h.waitTypes(conv.ID(), "state.delta", "run.finished")

				for i, ev := range got {
					require.NotNil(t, ev.Seq)
					assert.Equal(t, int64(i), *ev.Seq, "%s: no seq is skipped", ev.Type)
					assert.NotContains(t, marshal(t, ev), "UNDECODABLE-CONTENT")
				}
				byVendorID := map[string]*aep.Event{}
				var stands []*aep.Event
				for _, ev := range got {
					if ev.Type == "x.openhands.frame.undecodable" {
						stands = append(stands, ev)
					}
					if id, _ := ev.Data["vendor_event_id"].(string); id != "" {
						byVendorID[id] = ev
					}
				}
				require.Len(t, stands, len(frames))
				for i, stand := range stands {
					assert.Equal(t, aep.SeverityWarning, stand.Severity)
					if level != aep.CaptureNone {
						assert.Equal(t, json.Number(strconv.Itoa(len(frames[i]))), stand.Data["size_bytes"])
					}
				}
				if level != aep.CaptureNone {
					requested := byVendorID[action.ID()]
					require.NotNil(t, requested, "the action with a number beyond float64 range is delivered")
					assert.Equal(t, "tool.requested", requested.Type)
					if level == aep.CaptureFull {
						assert.Equal(t, "1e400", requested.Data["args"].(map[string]any)["timeout"])
					}
					assert.Contains(t, byVendorID, message.ID())
				}
				assert.Equal(t, int64(1), h.metric("otelcol_openhands_numbers_as_text", "", ""))
				assert.Zero(t, h.metric("otelcol_openhands_aep_events_refused", "", ""))
				h.validate()
			})
		}
	})
}

func marshal(t *testing.T, ev *aep.Event) string {
	t.Helper()
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	return string(b)
}

// TestRefusedEventTakesNoSeq: an event the projection refuses (a mapper
// bug) is dropped without taking a position: the next one takes it.
func TestRefusedEventTakesNoSeq(t *testing.T) {
	tel, err := newTelemetry(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	resource := pcommon.NewResource()
	projection.SetResource(resource, "openhands")
	e := &sessionEmitter{resource: resource, pos: &position{Epoch: 3}, tel: tel, logger: zaptest.NewLogger(t)}
	event := func(id string, data map[string]any) *aep.Event {
		return &aep.Event{AEP: aep.Version, ID: id, Type: "x.openhands.test.event", Time: "2026-07-12T10:15:00.000Z",
			Source: "aep://h:1/agent/openhands/session/s", Agent: "openhands", Session: "s", Severity: aep.SeverityDebug,
			Capture: aep.CaptureFull, Data: data}
	}
	logs := e.batch([]*aep.Event{
		event("01J0000000000000000000000A", map[string]any{"n": json.Number("1")}),
		event("01J0000000000000000000000B", map[string]any{"n": math.NaN()}),
		event("01J0000000000000000000000C", map[string]any{"n": json.Number("2")}),
	})
	var seqs []int64
	for _, ev := range aeptest.EventsOf(t, logs) {
		seqs = append(seqs, *ev.Seq)
	}
	assert.Equal(t, []int64{0, 1}, seqs)
	assert.Equal(t, int64(2), e.pos.NextSeq)
}
