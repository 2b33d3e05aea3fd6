package mapping

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeEvent(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		raw                         string
		kind, id, timestamp, source string
	}{
		{
			name: "microseconds",
			raw:  `{"kind":"PauseEvent","id":"e1","timestamp":"2026-07-12T10:15:00.123456","source":"user"}`,
			kind: "PauseEvent", id: "e1", timestamp: "2026-07-12T10:15:00.123456", source: "user",
		},
		{
			name: "whole_seconds",
			raw:  `{"kind":"PauseEvent","id":"e1","timestamp":"2026-07-12T10:15:00","source":"user"}`,
			kind: "PauseEvent", id: "e1", timestamp: "2026-07-12T10:15:00", source: "user",
		},
		{
			name: "parent_id_present",
			raw:  `{"kind":"PauseEvent","id":"e1","timestamp":"2026-07-12T10:15:00","source":"user","parent_id":"e0"}`,
			kind: "PauseEvent", id: "e1", timestamp: "2026-07-12T10:15:00", source: "user",
		},
		{
			name: "no_timestamp_and_odd_source",
			raw:  `{"kind":"PauseEvent","id":"e1","source":7}`,
			kind: "PauseEvent", id: "e1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := DecodeEvent([]byte(tc.raw))
			require.NoError(t, err)
			assert.Equal(t, tc.kind, ev.Kind())
			assert.Equal(t, tc.id, ev.ID())
			assert.Equal(t, tc.timestamp, ev.Timestamp())
			assert.Equal(t, tc.source, ev.Source())
		})
	}
}

func TestDecodeEventKeepsUnknownFieldsAndNumbers(t *testing.T) {
	ev, err := DecodeEvent([]byte(`{"kind":"FutureEvent","id":"e1","big":12345678901234567890,"nested":{"x":[1.50]}}`))
	require.NoError(t, err)
	assert.Equal(t, json.Number("12345678901234567890"), ev.Fields["big"])
	assert.Equal(t, map[string]any{"x": []any{json.Number("1.50")}}, ev.Fields["nested"])
}

func TestDecodeEventParentIDMakesNoDifference(t *testing.T) {
	with, err := DecodeEvent([]byte(`{"kind":"PauseEvent","id":"e1","timestamp":"2026-07-12T10:15:00","source":"user","parent_id":"e0"}`))
	require.NoError(t, err)
	without, err := DecodeEvent([]byte(`{"kind":"PauseEvent","id":"e1","timestamp":"2026-07-12T10:15:00","source":"user"}`))
	require.NoError(t, err)
	assert.Equal(t,
		marshal(t, newConversation(t, testConfig("metadata", false)).Map(with, received)[0]),
		marshal(t, newConversation(t, testConfig("metadata", false)).Map(without, received)[0]))
}

func TestDecodeEventErrors(t *testing.T) {
	for _, tc := range []struct{ name, raw string }{
		{"not_json", `{"kind":`},
		{"trailing_data", `{"kind":"A","id":"1"} {}`},
		{"array", `[{"kind":"A","id":"1"}]`},
		{"null", `null`},
		{"string", `"ActionEvent"`},
		{"missing_kind", `{"id":"1"}`},
		{"empty_kind", `{"kind":"","id":"1"}`},
		{"numeric_kind", `{"kind":3,"id":"1"}`},
		{"missing_id", `{"kind":"A"}`},
		{"empty_id", `{"kind":"A","id":""}`},
		{"null_id", `{"kind":"A","id":null}`},
		{"numeric_timestamp", `{"kind":"A","id":"1","timestamp":1752315300}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEvent([]byte(tc.raw))
			require.ErrorIs(t, err, ErrInvalidEvent)
		})
	}
}

func TestTransient(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"kind":"ConversationStateUpdateEvent","id":"a","key":"full_state","value":{}}`:           true,
		`{"kind":"ConversationStateUpdateEvent","id":"a","key":"execution_status","value":"idle"}`: false,
		`{"kind":"StreamingDeltaEvent","id":"a","content":"x"}`:                                    true,
		`{"kind":"ServerErrorEvent","id":"a","code":"X"}`:                                          true,
		`{"kind":"MessageEvent","id":"a"}`:                                                         false,
		`{"kind":"SandboxCheckpointEvent","id":"a"}`:                                               false,
	} {
		ev, err := DecodeEvent([]byte(raw))
		require.NoError(t, err)
		assert.Equal(t, want, ev.Transient(), raw)
	}
	assert.True(t, KnownKind("ActionEvent"))
	assert.False(t, KnownKind("SandboxCheckpointEvent"))
}

// TestEventTimeIsItsTimestamp pins that every way an Event is made reads
// its timestamp as ParseVendorTime does (the mapping and the decorator
// use that reading rather than parse it again).
func TestEventTimeIsItsTimestamp(t *testing.T) {
	fallback := received
	for _, ts := range []string{"2026-07-12T10:15:00.123456", "2026-07-12T10:15:00", "2026-07-12T10:15:00+02:00", "yesterday", ""} {
		decoded, err := DecodeEvent([]byte(`{"kind":"PauseEvent","id":"e1","timestamp":"` + ts + `"}`))
		require.NoError(t, err)
		for name, ev := range map[string]Event{
			"DecodeEvent":    decoded,
			"At":             At(ts),
			"Oversize.Event": Oversize{ID: "e1", Timestamp: ts}.Event(),
		} {
			assert.Equal(t, vendorTime(ts, fallback), ev.timeOr(fallback), "%s(%q)", name, ts)
		}
	}
	assert.Equal(t, fallback, Event{}.timeOr(fallback))
}
