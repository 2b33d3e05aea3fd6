package mapping

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestStatusMomentsGeneralRule pins the pairs the fixture leaves open, per
// the rules in StatusMoments' table.
func TestStatusMomentsGeneralRule(t *testing.T) {
	status := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		prev *string
		next string
		want []string
	}{
		{"null_waiting", nil, StatusWaiting, []string{typeRunStarted, typeAttentionRequested}},
		{"idle_waiting", status(StatusIdle), StatusWaiting, []string{typeRunStarted, typeAttentionRequested}},
		{"paused_waiting", status(StatusPaused), StatusWaiting, []string{typeAttentionRequested}},
		{"error_running", status(StatusError), StatusRunning, []string{typeRunStarted}},
		{"stuck_running", status(StatusStuck), StatusRunning, []string{typeRunStarted}},
		{"paused_finished", status(StatusPaused), StatusFinished, []string{typeRunFinished}},
		{"paused_error", status(StatusPaused), StatusError, []string{typeRunFailed}},
		{"paused_idle", status(StatusPaused), StatusIdle, []string{}},
		{"paused_deleting", status(StatusPaused), StatusDeleting, []string{typeRunCancelled, typeSessionEnded}},
		{"waiting_finished", status(StatusWaiting), StatusFinished, []string{typeAttentionResolved, typeRunFinished}},
		{"waiting_stuck", status(StatusWaiting), StatusStuck, []string{typeAttentionResolved, typeRunFailed}},
		{"idle_deleting", status(StatusIdle), StatusDeleting, []string{typeSessionEnded}},
		{"null_deleting", nil, StatusDeleting, []string{typeSessionEnded}},
		{"null_idle", nil, StatusIdle, []string{}},
		{"null_finished", nil, StatusFinished, []string{}},
		{"null_paused", nil, StatusPaused, []string{}},
		{"idle_paused", status(StatusIdle), StatusPaused, []string{}},
		{"finished_idle", status(StatusFinished), StatusIdle, []string{}},
		{"deleting_running", status(StatusDeleting), StatusRunning, []string{}},
		{"running_future", status(StatusRunning), "archived", []string{}},
		{"waiting_future", status(StatusWaiting), "archived", []string{typeAttentionResolved}},
		{"future_running", status("archived"), StatusRunning, []string{}},
		{"empty_running", status(""), StatusRunning, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StatusMoments(tc.prev, tc.next)
			names := []string{}
			for _, m := range got {
				names = append(names, m.Type)
			}
			assert.Equal(t, tc.want, names)
		})
	}
}

func TestStatusMomentsPayloads(t *testing.T) {
	waiting := StatusWaiting
	got := StatusMoments(&waiting, StatusFinished)
	assert.Equal(t, []Moment{
		{Type: typeAttentionResolved, Data: map[string]any{"resolution": "answered"}},
		{Type: typeRunFinished, Data: map[string]any{}},
	}, got)
	paused := StatusPaused
	assert.Equal(t, []Moment{{Type: typeRunFailed, Data: map[string]any{"reason": "stuck"}}}, StatusMoments(&paused, StatusStuck))
}
