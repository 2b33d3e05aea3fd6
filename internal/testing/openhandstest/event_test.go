package openhandstest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFormatTimestamp(t *testing.T) {
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{name: "microseconds", in: time.Date(2026, 8, 22, 14, 3, 11, 402137000, time.UTC), want: "2026-08-22T14:03:11.402137"},
		{name: "leading zero microseconds", in: time.Date(2026, 8, 22, 14, 3, 11, 1000, time.UTC), want: "2026-08-22T14:03:11.000001"},
		{name: "exactly zero has no fraction", in: time.Date(2026, 8, 22, 14, 3, 11, 0, time.UTC), want: "2026-08-22T14:03:11"},
		{name: "nanoseconds are truncated", in: time.Date(2026, 8, 22, 14, 3, 11, 999, time.UTC), want: "2026-08-22T14:03:11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, FormatTimestamp(tt.in))
		})
	}
}

func TestNormalizeQueryTime(t *testing.T) {
	cest := time.FixedZone("CEST", 2*60*60)
	tests := []struct {
		name, in string
		loc      *time.Location
		want     string
		wantErr  bool
	}{
		{name: "naive with microseconds", in: "2026-08-22T14:03:11.402137", loc: time.UTC, want: "2026-08-22T14:03:11.402137"},
		{name: "naive zero fraction", in: "2026-08-22T14:03:11.000000", loc: time.UTC, want: "2026-08-22T14:03:11"},
		{name: "naive is server local", in: "2026-08-22T14:03:11", loc: cest, want: "2026-08-22T14:03:11"},
		{name: "aware converted to server local", in: "2026-08-22T12:03:11Z", loc: cest, want: "2026-08-22T14:03:11"},
		{name: "offset", in: "2026-08-22T14:03:11.5+02:00", loc: time.UTC, want: "2026-08-22T12:03:11.500000"},
		{name: "date only", in: "2026-08-22", loc: time.UTC, want: "2026-08-22T00:00:00"},
		{name: "garbage", in: "yesterday", loc: time.UTC, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := normalizeQueryTime(tt.in, tt.loc)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestKindFQN(t *testing.T) {
	assert.Equal(t, "openhands.sdk.event.llm_convertible.message.MessageEvent", KindFQN(KindMessageEvent))
	assert.Equal(t, "openhands.sdk.event.llm_convertible.observation.UserRejectObservation", KindFQN(KindUserRejectObservation))
	assert.Equal(t, "openhands.sdk.event.conversation_state.ConversationStateUpdateEvent", KindFQN(KindConversationStateUpdateEvent))
	assert.Empty(t, KindFQN("FutureEvent"))
}

func TestUUIDs(t *testing.T) {
	id := NewUUID()
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, id)
	parsed, ok := parseUUID(hexID(id))
	assert.True(t, ok)
	assert.Equal(t, id, parsed)
	for _, bad := range []string{"", "not-a-uuid", id[:35] + "g"} {
		_, ok := parseUUID(bad)
		assert.False(t, ok, bad)
	}
}

func TestAppendStampsLikeTheServer(t *testing.T) {
	s := Start(t, Config{Clock: func() time.Time { return time.Date(2026, 8, 22, 14, 3, 11, 0, time.UTC) }})
	c := newConversation(t, s, ConversationOptions{})
	stored := appendAll(t, c, MessageEvent("user", "hi"), StateUpdateEvent("agent_state", map[string]any{"k": 1}), PauseEvent())
	assert.Equal(t, "2026-08-22T14:03:11", stored[0].Timestamp(), "whole-second clock: no fraction")
	assert.NotContains(t, stored[0], "parent_id", "the first event is a root")
	assert.Equal(t, stored[0].ID(), stored[1].ParentID())
	assert.Equal(t, stored[0].ID(), stored[2].ParentID(), "state updates do not move HEAD")

	delta, err := c.Append(StreamingDeltaEvent("tok"))
	require.NoError(t, err)
	assert.NotContains(t, delta, "parent_id")
	assert.Len(t, c.Events(), 3, "deltas are published, never persisted")

	_, err = c.AppendJSON([]byte(`{"kind":"MessageEvent","source":"agent"}`))
	assert.Error(t, err, "a raw event needs an id")
	_, err = c.AppendJSON([]byte(`{"kind":"FutureEvent","id":"` + stored[0].ID() + `"}`))
	assert.Error(t, err, "ids are unique")
	raw, err := c.AppendJSON([]byte(`{"kind":"FutureEvent","id":"x-1","timestamp":"2026-08-22T14:03:12","source":"agent","n":1.50}`))
	require.NoError(t, err)
	assert.Equal(t, "1.50", raw["n"].(interface{ String() string }).String(), "numbers are kept verbatim")

	ev, err := c.SetState("agent_state", map[string]any{"k": 1})
	require.NoError(t, err)
	assert.Nil(t, ev, "unchanged fields emit nothing")
	require.NoError(t, c.Delete())
	_, err = c.Append(MessageEvent("agent", "late"))
	assert.ErrorIs(t, err, ErrConversationDeleted)
}
