package aepfileexporter

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func seqKey(source string, epoch, seq int64) eventKey {
	return eventKey{source: source, id: fmt.Sprintf("%s-%d-%d", source, epoch, seq), epoch: epoch, seq: &seq}
}

func idKey(id string) eventKey { return eventKey{source: "aep://h/agent/a", id: id} }

// Seqs are held as ranges: a redelivery of any of them, in any order, is
// known, a seq never written is not, a stream written in order is one
// range whatever its length, and a gap filled joins its neighbours.
func TestDedupHoldsSeqRanges(t *testing.T) {
	d := newDedup(16)
	for seq := range int64(5000) {
		d.add(seqKey("src", 0, seq))
	}
	assert.Equal(t, 1, d.ranges, "5,000 seqs, one range")
	for _, seq := range rand.New(rand.NewPCG(1, 2)).Perm(5000) {
		assert.True(t, d.has(seqKey("src", 0, int64(seq))), seq)
	}
	assert.False(t, d.has(seqKey("src", 0, 5000)))
	assert.False(t, d.has(seqKey("src", 0, -1)))
	assert.False(t, d.has(seqKey("src", 1, 7)), "another epoch is another stream")
	assert.False(t, d.has(seqKey("other", 0, 7)), "another source too")

	gaps := newDedup(16)
	for _, seq := range []int64{1, 3, 5, 9, 2, 4, 8} {
		gaps.add(seqKey("src", 0, seq))
	}
	assert.Equal(t, 2, gaps.ranges, "[1,5] and [8,9]")
	assert.False(t, gaps.has(seqKey("src", 0, 6)))
	assert.False(t, gaps.has(seqKey("src", 0, 0)))
	assert.True(t, gaps.has(seqKey("src", 0, 8)))
}

// A position written under another id is another event (an emitter that
// reused it), not a redelivery, while the position is among the last
// written; the event at it first stays a duplicate.
func TestDedupTellsAReusedPosition(t *testing.T) {
	d := newDedup(4)
	first := seqKey("src", 0, 5)
	d.add(first)
	reused := first
	reused.id = "another"
	assert.False(t, d.has(reused), "another event at a recent position")
	d.add(reused)
	assert.True(t, d.has(first))
	assert.True(t, d.has(reused), "each is known")
	for seq := range int64(5) {
		d.add(seqKey("src", 0, seq))
	}
	assert.True(t, d.has(reused), "past the last positions, the ranges alone tell")
}

// Past its limit of ranges, dedup forgets the oldest: the lowest range of
// the stream being written, or the least recently written other stream.
func TestDedupForgetsTheOldestRangesPastItsLimit(t *testing.T) {
	d := newDedup(3)
	for seq := int64(0); seq < 20; seq += 2 { // every other seq: a range each
		d.add(seqKey("src", 0, seq))
	}
	assert.Equal(t, 3, d.ranges)
	assert.False(t, d.has(seqKey("src", 0, 0)))
	for _, seq := range []int64{14, 16, 18} {
		assert.True(t, d.has(seqKey("src", 0, seq)), seq)
	}

	d.add(seqKey("src", 1, 0))
	assert.Equal(t, 3, d.ranges)
	assert.True(t, d.has(seqKey("src", 1, 0)))
	assert.False(t, d.has(seqKey("src", 0, 14)), "the lowest range of the least recently written stream went")
	d.add(seqKey("src", 2, 0))
	d.add(seqKey("src", 3, 0))
	assert.Equal(t, 3, d.ranges)
	assert.Len(t, d.seqs, 3, "stream 0 went whole, range by range")
	assert.False(t, d.has(seqKey("src", 0, 18)))
}

// Events without a seq are known by (source, id) among the last limit.
func TestDedupForgetsTheOldestIDsPastItsLimit(t *testing.T) {
	d := newDedup(2)
	d.add(idKey("a"))
	d.add(idKey("b"))
	d.add(idKey("a")) // already held: no slot taken
	d.add(idKey("c"))
	assert.False(t, d.has(idKey("a")))
	assert.True(t, d.has(idKey("b")))
	assert.True(t, d.has(idKey("c")))
}

func TestDedupOfNoLimitRemembersNothing(t *testing.T) {
	d := newDedup(0)
	d.add(seqKey("src", 0, 1))
	d.add(idKey("a"))
	assert.False(t, d.has(seqKey("src", 0, 1)))
	assert.False(t, d.has(idKey("a")))
}

func TestRecover(t *testing.T) {
	line := func(id, typ string, seq int) string {
		s := `{"aep":"0.1","id":"` + id + `","type":"` + typ + `","source":"aep://h/agent/a/session/s"`
		if seq >= 0 {
			s += fmt.Sprintf(`,"seq":%d`, seq)
		}
		return s + "}\n"
	}
	long := `{"pad":"` + strings.Repeat("x", 200<<10) + "\"}\n" // longer than the reader's buffer
	tests := []struct {
		name      string
		content   string
		wantSeqs  []int64
		wantIDs   []string
		wantEnded bool
	}{
		{name: "seqs", content: line("a", "run.started", 0) + line("b", "run.started", 1), wantSeqs: []int64{0, 1}},
		{name: "ids_without_seq", content: line("a", "agent.heartbeat", -1), wantIDs: []string{"a"}},
		{name: "a_long_line", content: line("a", "run.started", 0) + long + line("b", "run.started", 1), wantSeqs: []int64{0, 1}},
		{name: "ended", content: line("a", "run.started", 0) + line("z", "session.ended", 1), wantSeqs: []int64{0, 1}, wantEnded: true},
		{name: "not_events_passed_over", content: "not json\n" + line("a", "run.started", 3), wantSeqs: []int64{3}},
		{name: "an_unterminated_last_line_is_not_read", content: line("a", "run.started", 0) + strings.TrimSuffix(line("b", "run.started", 1), "\n"), wantSeqs: []int64{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDedup(8)
			ended, err := d.recover(strings.NewReader(tt.content))
			assert.NoError(t, err)
			assert.Equal(t, tt.wantEnded, ended)
			held := 0
			for _, s := range d.seqs {
				for _, r := range s.r {
					held += int(r.hi - r.lo + 1)
				}
			}
			assert.Equal(t, len(tt.wantSeqs), held, "seqs held")
			for _, seq := range tt.wantSeqs {
				assert.True(t, d.seqs[streamKey{"aep://h/agent/a/session/s", 0}].has(seq), seq)
			}
			assert.Equal(t, len(tt.wantIDs), d.ids.Len())
			for _, id := range tt.wantIDs {
				assert.True(t, d.has(eventKey{source: "aep://h/agent/a/session/s", id: id}), id)
			}
		})
	}
}
