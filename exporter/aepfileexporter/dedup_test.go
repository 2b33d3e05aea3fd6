package aepfileexporter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDedupForgetsTheOldestPastItsLimit(t *testing.T) {
	d := newDedup(2)
	d.add("a")
	d.add("b")
	d.add("a") // already held: no slot taken
	d.add("c")
	assert.False(t, d.has("a"))
	assert.True(t, d.has("b"))
	assert.True(t, d.has("c"))
	assert.Equal(t, 2, d.Len())
}

func TestRecoverFromLastLines(t *testing.T) {
	line := func(id, typ string) string {
		return `{"aep":"0.1","id":"` + id + `","type":"` + typ + `","source":"aep://h/agent/a/session/s"}` + "\n"
	}
	long := strings.Repeat("x", tailChunk) // pushes the early lines past one chunk
	tests := []struct {
		name      string
		content   string
		limit     int
		wantIDs   []string
		wantEnded bool
	}{
		{name: "all_lines_within_the_limit", content: line("a", "run.started") + line("b", "run.started"), limit: 4, wantIDs: []string{"a", "b"}},
		{name: "only_the_last_lines", content: line("a", "run.started") + line("b", "run.started") + line("c", "run.started"), limit: 2, wantIDs: []string{"b", "c"}},
		{name: "across_chunks", content: line("a", "run.started") + `{"pad":"` + long + "\"}\n" + line("b", "run.started"), limit: 3, wantIDs: []string{"a", "b"}},
		{name: "ended", content: line("a", "run.started") + line("z", "session.ended"), limit: 4, wantIDs: []string{"a", "z"}, wantEnded: true},
		{name: "ended_then_a_late_event", content: line("z", "session.ended") + line("late", "run.started"), limit: 4, wantIDs: []string{"z", "late"}, wantEnded: true},
		{name: "not_events_passed_over", content: "not json\n" + line("a", "run.started"), limit: 4, wantIDs: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o600))
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			lines, err := lastLines(f, int64(len(tt.content)), tt.limit)
			require.NoError(t, err)
			d := newDedup(tt.limit)
			assert.Equal(t, tt.wantEnded, d.recover(lines))
			for _, id := range tt.wantIDs {
				assert.True(t, d.has(dedupKey("aep://h/agent/a/session/s", id)), id)
			}
			assert.Equal(t, len(tt.wantIDs), d.Len(), "only those")
		})
	}
}
