package aeprelayexporter

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/logevent"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

// multiResourceLogs spreads events over two resources with two scopes
// each, one event per scope, in order.
func multiResourceLogs(t *testing.T, events []*aep.Event) plog.Logs {
	t.Helper()
	require.Len(t, events, 4)
	ld := plog.NewLogs()
	for r := range 2 {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutInt("resource", int64(r))
		for s := range 2 {
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName("scope")
			sl.Scope().SetVersion(string(rune('a' + 2*r + s)))
			require.NoError(t, projection.ToLogRecord(events[2*r+s], sl.LogRecords().AppendEmpty(), projection.Options{}))
		}
	}
	return ld
}

func TestConvertKeepsRecordOrder(t *testing.T) {
	events := sessionEvents("s1", 4)
	out := converter{}.convert(multiResourceLogs(t, events))

	require.Empty(t, out.skipped)
	require.Empty(t, out.refused)
	require.Len(t, out.events, 4)
	for i, got := range out.events {
		want, err := events[i].MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got.raw))
		assert.Equal(t, events[i].ID, got.id)
		assert.Equal(t, events[i].Type, got.typ)
		assert.Equal(t, "openhands", got.agent, "the agent picks the link")
		assert.Equal(t, logevent.RecordRef{Resource: i / 2, Scope: i % 2, Record: 0}, got.record)
	}
}

// projected writes event 1 of session s1, with id and changed by mutate,
// onto the record.
func projected(id string, mutate func(*aep.Event)) func(*testing.T, plog.LogRecord) {
	return func(t *testing.T, lr plog.LogRecord) {
		ev := newEvent("s1", 1)
		ev.ID = id
		mutate(ev)
		require.NoError(t, projection.ToLogRecord(ev, lr, projection.Options{}))
	}
}

func TestConvertSortsOutWhatCannotBeSent(t *testing.T) {
	tests := []struct {
		name string
		// record writes the record under test onto lr.
		record      func(t *testing.T, lr plog.LogRecord)
		wantSkipped []string
		wantReason  string
		wantID      string
		wantErr     string
	}{
		{
			name: "not_aep",
			record: func(_ *testing.T, lr plog.LogRecord) {
				lr.SetEventName("app.request")
				lr.Body().SetStr("GET /")
			},
			wantSkipped: []string{"app.request"},
		},
		{
			name:        "no_event_name",
			record:      func(_ *testing.T, lr plog.LogRecord) { lr.Body().SetStr("plain log line") },
			wantSkipped: []string{""},
		},
		{
			name:       "aep_record_that_cannot_be_rebuilt",
			record:     func(_ *testing.T, lr plog.LogRecord) { lr.SetEventName("dev.aep.run.started") },
			wantReason: reasonProjection,
			wantErr:    "required attribute aep.agent_id is missing",
		},
		{
			name: "invalid_envelope",
			record: projected("no-seq", func(ev *aep.Event) {
				ev.Seq = nil // session-scoped events need a seq
			}),
			wantReason: reasonInvalid,
			wantID:     "no-seq",
			wantErr:    "scope rule",
		},
		{
			name: "invalid_payload",
			record: projected("bad-trigger", func(ev *aep.Event) {
				ev.Data = map[string]any{"trigger": json.Number("7")}
			}),
			wantReason: reasonInvalid,
			wantID:     "bad-trigger",
			wantErr:    "payload rule",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, after := newEvent("s1", 0), newEvent("s1", 2)
			ld := aeptest.LogsOf(t, before)
			records := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			tt.record(t, records.AppendEmpty())
			require.NoError(t, projection.ToLogRecord(after, records.AppendEmpty(), projection.Options{}))

			out := converter{}.convert(ld)

			require.Len(t, out.events, 2, "the rest of the push goes on")
			assert.Equal(t, before.ID, out.events[0].id)
			assert.Equal(t, after.ID, out.events[1].id)
			assert.Equal(t, logevent.RecordRef{Record: 2}, out.events[1].record)
			assert.Equal(t, tt.wantSkipped, out.skipped)
			if tt.wantReason == "" {
				assert.Empty(t, out.refused)
				return
			}
			require.Len(t, out.refused, 1)
			got := out.refused[0]
			assert.Equal(t, tt.wantReason, got.reason)
			assert.Equal(t, tt.wantID, got.id)
			require.Error(t, got.err)
			assert.Contains(t, got.err.Error(), tt.wantErr)
		})
	}
}

func TestConvertDownlevelsAboveMaxCapture(t *testing.T) {
	request := func() *aep.Event { return attentionRequest("s1", 0) }
	structural := map[string]any{
		"kind":        "permission",
		"prompt":      "openhands requests permission: Bash",
		"options":     []any{map[string]any{"id": "allow", "label": "allow"}, map[string]any{"id": "deny", "label": "deny"}},
		"respond_via": []any{"control"},
	}
	tests := []struct {
		name        string
		ceiling     aep.Capture
		wantCapture aep.Capture
		wantData    map[string]any
	}{
		{name: "no_ceiling_leaves_the_event", wantCapture: aep.CaptureFull, wantData: request().Data},
		{name: "full_ceiling_leaves_the_event", ceiling: aep.CaptureFull, wantCapture: aep.CaptureFull, wantData: request().Data},
		{name: "metadata_ceiling_degrades_free_text", ceiling: aep.CaptureMetadata, wantCapture: aep.CaptureMetadata, wantData: structural},
		{name: "redacted_ceiling_never_mints_redacted", ceiling: aep.CaptureRedacted, wantCapture: aep.CaptureMetadata, wantData: structural},
		{name: "none_ceiling_keeps_the_envelope", ceiling: aep.CaptureNone, wantCapture: aep.CaptureNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := converter{logevent.Converter{Ceiling: tt.ceiling}}.convert(aeptest.LogsOf(t, request()))
			require.Empty(t, out.refused)
			require.Len(t, out.events, 1)
			require.NoError(t, schema.ValidateJSON(out.events[0].raw))
			got, err := aep.Parse(out.events[0].raw)
			require.NoError(t, err)
			assert.Equal(t, tt.wantCapture, got.Capture)
			assert.Equal(t, normalizeJSON(t, tt.wantData), normalizeJSON(t, got.Data))
		})
	}
}

// normalizeJSON compares decoded values by their JSON text.
func normalizeJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

func TestRecordsOf(t *testing.T) {
	events := sessionEvents("s1", 4)
	ld := multiResourceLogs(t, events)

	got := logevent.RecordsOf(ld, []logevent.RecordRef{{Resource: 0, Scope: 1}, {Resource: 1, Scope: 0}, {Resource: 1, Scope: 1}})

	require.Equal(t, 2, got.ResourceLogs().Len())
	first := got.ResourceLogs().At(0)
	v, _ := first.Resource().Attributes().Get("resource")
	assert.Equal(t, int64(0), v.Int())
	require.Equal(t, 1, first.ScopeLogs().Len())
	assert.Equal(t, "b", first.ScopeLogs().At(0).Scope().Version())
	second := got.ResourceLogs().At(1)
	require.Equal(t, 2, second.ScopeLogs().Len())
	assert.Equal(t, "c", second.ScopeLogs().At(0).Scope().Version())
	assert.Equal(t, "d", second.ScopeLogs().At(1).Scope().Version())

	out := converter{}.convert(got)
	assert.Equal(t, []string{events[1].ID, events[2].ID, events[3].ID}, []string{out.events[0].id, out.events[1].id, out.events[2].id})
}
