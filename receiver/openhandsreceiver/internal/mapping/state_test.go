package mapping

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// TestRestoreContinuesExactly cuts one conversation's history at every
// point, carries the State across the cut through its JSON form, and
// checks that the restored conversation maps the rest exactly as the
// uninterrupted one did: same ids, runs, causes and subjects.
func TestRestoreContinuesExactly(t *testing.T) {
	events := []Event{
		message(t, "m1", "user", "user"),
		stateEvent(t, "s1", StatusRunning),
		action(t, "a1", "call-1"),
		stateEvent(t, "s2", StatusWaiting),
		stateEvent(t, "s3", StatusRunning),
		observation(t, "o1", "call-1"),
		stateEvent(t, "s4", StatusFinished),
		message(t, "m2", "user", "user"),
		stateEvent(t, "s5", StatusRunning),
		action(t, "a2", "call-2"),
		stateEvent(t, "s6", StatusWaiting),
		stateEvent(t, "s7", StatusDeleting),
	}
	cfg := testConfig(aep.CaptureMetadata, false)
	whole := newConversation(t, cfg)
	var perEvent [][]string
	whole.Start(received, received)
	for _, ev := range events {
		var out []string
		for _, e := range whole.Map(ev, received) {
			out = append(out, marshal(t, e))
		}
		perEvent = append(perEvent, out)
	}
	require.True(t, whole.Ended())

	for cut := range events {
		before := newConversation(t, cfg)
		before.Start(received, received)
		feed(t, before, events[:cut]...)
		raw, err := json.Marshal(before.s)
		require.NoError(t, err)
		var s State
		require.NoError(t, json.Unmarshal(raw, &s))

		after, err := NewConversation(cfg, &s)
		require.NoError(t, err)
		assert.Nil(t, after.Start(received, received), "cut %d: a restored session does not start again", cut)
		for i, ev := range events[cut:] {
			var got []string
			for _, e := range after.Map(ev, received) {
				got = append(got, marshal(t, e))
			}
			assert.Equal(t, perEvent[cut+i], got, "cut %d, event %d", cut, cut+i)
		}
	}
}

func TestSnapshotOfAFreshConversationIsZero(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureMetadata, false))
	assert.Equal(t, State{}, *c.s)
	raw, err := json.Marshal(c.s)
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(raw), "a zero state encodes to nothing, so added fields default cleanly")
}
