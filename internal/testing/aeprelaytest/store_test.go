package aeprelaytest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func mustIngested(t *testing.T, raw string) *ingested {
	t.Helper()
	ev, err := parseEvent([]byte(raw), nil)
	require.NoError(t, err)
	return newIngested([]byte(raw), ev, BindingPOST, 0)
}

func positions(entries []*ingested) []position {
	out := make([]position, len(entries))
	for i, e := range entries {
		out[i] = e.pos
	}
	return out
}

func TestStoreInsertSortsByEpochThenSeq(t *testing.T) {
	s := newStore(10, 10)
	for _, p := range []position{{0, 2}, {1, 0}, {0, 0}, {0, 1}, {1, 3}, {0, 7}} {
		require.True(t, s.admit(mustIngested(t, event("progress.status", "s1", int(p.epoch), int(p.seq)))))
	}
	assert.Equal(t, []position{{0, 0}, {0, 1}, {0, 2}, {0, 7}, {1, 0}, {1, 3}},
		positions(s.session(sessionKey{sourceOf("s1"), "s1"})))
}

func TestStoreAdmissionDedupesOnSourceAndID(t *testing.T) {
	s := newStore(10, 10)
	raw := event("progress.status", "s1", 0, 0)
	require.True(t, s.admit(mustIngested(t, raw)))
	assert.False(t, s.admit(mustIngested(t, raw)), "a redelivery is not admitted twice")
	other := `{"aep":"0.1","id":"ev-s1-0-0-progress.status","type":"progress.status","time":"2026-07-03T10:00:00Z","source":"aep://other/agent/alpha","agent":"alpha","session":"s1","seq":0}`
	assert.True(t, s.admit(mustIngested(t, other)), "the same id from another source is another Event")
	assert.Len(t, s.session(sessionKey{sourceOf("s1"), "s1"}), 1)
	assert.Len(t, s.session(sessionKey{"aep://other/agent/alpha", "s1"}), 1)
}

func TestStoreTrimsOldestAndReportsExhaustion(t *testing.T) {
	s := newStore(3, 10)
	for seq := range 6 {
		s.admit(mustIngested(t, event("progress.status", "s1", 0, seq)))
	}
	assert.Equal(t, []position{{0, 3}, {0, 4}, {0, 5}}, positions(s.session(sessionKey{sourceOf("s1"), "s1"})))
	for _, tc := range []struct {
		name      string
		after     position
		exhausted bool
		want      []position
	}{
		{"resume before the trimmed tail is exhausted", position{0, 1}, true, []position{{0, 3}, {0, 4}, {0, 5}}},
		{"resume at the last trimmed position is whole", position{0, 2}, false, []position{{0, 3}, {0, 4}, {0, 5}}},
		{"resume inside the buffer replays strictly after", position{0, 4}, false, []position{{0, 5}}},
		{"resume at the head replays nothing", position{0, 5}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts := s.replayAfter("s1", tc.after)
			require.Len(t, parts, 1)
			assert.Equal(t, tc.exhausted, parts[0].exhausted)
			assert.Equal(t, position{0, 3}, parts[0].earliest)
			assert.Equal(t, tc.want, positionsOrNil(parts[0].entries))
		})
	}
}

func positionsOrNil(entries []*ingested) []position {
	if len(entries) == 0 {
		return nil
	}
	return positions(entries)
}

func TestStoreEvictsLeastRecentlyWrittenSession(t *testing.T) {
	s := newStore(10, 2)
	s.admit(mustIngested(t, event("progress.status", "old", 0, 0)))
	s.admit(mustIngested(t, event("progress.status", "busy", 0, 0)))
	s.admit(mustIngested(t, event("progress.status", "old", 0, 1))) // old is now the most recent
	s.admit(mustIngested(t, event("progress.status", "new", 0, 0)))
	assert.Equal(t, []SessionRef{{sourceOf("new"), "new"}, {sourceOf("old"), "old"}}, s.sessions())

	assert.Empty(t, s.replayAfter("busy", position{0, 0}), "resuming at the evicted session's last position lost nothing")

	s.admit(mustIngested(t, event("progress.status", "new", 0, 1))) // new is now the most recent
	s.admit(mustIngested(t, event("progress.status", "busy", 0, 1)))
	assert.Equal(t, []SessionRef{{sourceOf("busy"), "busy"}, {sourceOf("new"), "new"}}, s.sessions())
}

func TestStoreEvictionIsReportedOnResume(t *testing.T) {
	s := newStore(10, 1)
	s.admit(mustIngested(t, event("progress.status", "gone", 0, 0)))
	s.admit(mustIngested(t, event("progress.status", "gone", 0, 1)))
	s.admit(mustIngested(t, event("progress.status", "other", 0, 0))) // evicts gone
	parts := s.replayAfter("gone", position{0, 0})
	require.Len(t, parts, 1)
	assert.True(t, parts[0].exhausted, "seq 1 was evicted after the resume point")
	assert.False(t, parts[0].hasEarliest)

	s.admit(mustIngested(t, event("progress.status", "gone", 0, 2))) // back, evicting other
	parts = s.replayAfter("gone", position{0, 0})
	require.Len(t, parts, 1)
	assert.True(t, parts[0].exhausted, "the tombstone carries over to the new buffer")
	assert.Equal(t, []position{{0, 2}}, positions(parts[0].entries))
}

func TestStoreReplayAllHoldsEverySession(t *testing.T) {
	s := newStore(10, 10)
	s.admit(mustIngested(t, event("progress.status", "b", 0, 0)))
	s.admit(mustIngested(t, event("progress.status", "a", 0, 0)))
	s.admit(mustIngested(t, event("progress.status", "a", 0, 1)))
	parts := s.replayAll()
	require.Len(t, parts, 2)
	assert.Equal(t, "a", parts[0].key.session)
	assert.Len(t, parts[0].entries, 2)
	assert.Equal(t, "b", parts[1].key.session)
}

func TestUnpositionedEventsAppendInArrivalOrder(t *testing.T) {
	s := newStore(10, 10)
	routed := `{"aep":"0.1","id":"r1","type":"attention.routed","subject":"req","time":"2026-07-03T10:00:00Z","source":"aep://sink/agent/sink","agent":"sink","session":"s1","capture":"metadata"}`
	in := mustIngested(t, routed)
	assert.False(t, in.positioned)
	require.True(t, s.admit(in))
	assert.Len(t, s.session(sessionKey{"aep://sink/agent/sink", "s1"}), 1)
}

func TestResumeToken(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session string
		pos     position
	}{
		{"plain", "s_8f2c", position{0, 17}},
		{"session with colons", "run:conv:1", position{3, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			session, pos, err := parseToken(token(tc.session, tc.pos))
			require.NoError(t, err)
			assert.Equal(t, tc.session, session)
			assert.Equal(t, tc.pos, pos)
		})
	}
	for _, bad := range []string{"", "s1", "s1:0", ":0:1", "s1:x:1", "s1:0:-1"} {
		t.Run("refuses "+bad, func(t *testing.T) {
			_, _, err := parseToken(bad)
			assert.Error(t, err)
		})
	}
}

func TestWidestCeiling(t *testing.T) {
	assert.Equal(t, aep.Capture(""), widest([]aep.Capture{aep.CaptureNone, ""}))
	assert.Equal(t, aep.CaptureRedacted, widest([]aep.Capture{aep.CaptureNone, aep.CaptureRedacted, aep.CaptureMetadata}))
	assert.Equal(t, aep.CaptureNone, widest([]aep.Capture{aep.CaptureNone}))
}
