package mapping

// The server's own ConversationExecutionStatus values.
const (
	StatusIdle     = "idle"
	StatusRunning  = "running"
	StatusPaused   = "paused"
	StatusWaiting  = "waiting_for_confirmation"
	StatusFinished = "finished"
	StatusError    = "error"
	StatusStuck    = "stuck"
	StatusDeleting = "deleting"
)

// ClosesRuns reports whether status s has no run under way: idle, finished,
// error and stuck (the table's "closed" statuses, with no status yet).
func ClosesRuns(s string) bool {
	return s == StatusIdle || s == StatusFinished || s == StatusError || s == StatusStuck
}

// AEP types the status plane synthesizes.
const (
	typeRunStarted         = "run.started"
	typeRunFinished        = "run.finished"
	typeRunFailed          = "run.failed"
	typeRunCancelled       = "run.cancelled"
	typeAttentionRequested = "attention.requested"
	typeAttentionResolved  = "attention.resolved"
	typeSessionStarted     = "session.started"
	typeSessionEnded       = "session.ended"
)

// waitingPrompt is the pinned attention prompt: static text, no content, so
// it is honest at capture metadata (AEP-0003 §9.2).
const waitingPrompt = "Awaiting confirmation for a pending action"

// Moment is one lifecycle event a status transition implies: its type and
// its payload at the status table's level (before capture gating and the
// vendor_ts/vendor_event_id stamps).
type Moment struct {
	Type string
	Data map[string]any
}

// StatusMoments is the pure transition table behind run synthesis and the
// attention loop: the moments the move from prev (nil before the first
// status) to next implies, in emission order. It never returns nil.
//
// Pinned by the fixture (status_transitions) and extended by one rule per
// column, so that unpinned pairs behave like their pinned neighbours. "open"
// statuses are running, paused and waiting_for_confirmation (a run is under
// way); "closed" ones are no status yet, idle, finished, error and stuck.
// Any other (future) status is neither: it opens and closes nothing.
//
//	prev → next                         moments
//	x → x (same status)                 none
//	deleting → anything                 none (the session has ended)
//	waiting → anything else             attention.resolved first: dismissed when
//	                                    next is paused or deleting, else answered
//	closed → running                    run.started
//	open → running                      none (paused/waiting resume the same run)
//	closed → waiting                    run.started, attention.requested
//	open → waiting                      attention.requested {kind: permission,
//	                                    prompt: waitingPrompt}, no options, no
//	                                    respond path (the read-only channel)
//	open → finished                     run.finished {}
//	open → error                        run.failed {reason: error}
//	open → stuck                        run.failed {reason: stuck}
//	running → idle                      run.finished {reason: idle}
//	paused|waiting → idle               none (pinned for waiting: only running
//	                                    closes honestly into idle)
//	anything → paused                   none (paused never closes)
//	open → deleting                     run.cancelled {reason: deleting},
//	                                    session.ended {reason: killed}
//	closed → deleting                   session.ended {reason: killed}
//	closed → finished|error|stuck|idle  none (no run to close)
func StatusMoments(prev *string, next string) []Moment {
	out := []Moment{}
	if prev != nil && (*prev == next || *prev == StatusDeleting) {
		return out
	}
	from := ""
	if prev != nil {
		from = *prev
	}
	if from == StatusWaiting {
		resolution := "answered"
		if next == StatusPaused || next == StatusDeleting {
			resolution = "dismissed"
		}
		out = append(out, Moment{Type: typeAttentionResolved, Data: map[string]any{"resolution": resolution}})
	}
	closed := prev == nil || ClosesRuns(from)
	open := from == StatusRunning || from == StatusPaused || from == StatusWaiting
	switch next {
	case StatusRunning:
		if closed {
			out = append(out, Moment{Type: typeRunStarted, Data: map[string]any{}})
		}
	case StatusWaiting:
		if closed {
			out = append(out, Moment{Type: typeRunStarted, Data: map[string]any{}})
		}
		out = append(out, Moment{Type: typeAttentionRequested, Data: map[string]any{"kind": "permission", "prompt": waitingPrompt}})
	case StatusFinished:
		if open {
			out = append(out, Moment{Type: typeRunFinished, Data: map[string]any{}})
		}
	case StatusError, StatusStuck:
		if open {
			out = append(out, Moment{Type: typeRunFailed, Data: map[string]any{"reason": next}})
		}
	case StatusIdle:
		if from == StatusRunning {
			out = append(out, Moment{Type: typeRunFinished, Data: map[string]any{"reason": "idle"}})
		}
	case StatusDeleting:
		if open {
			out = append(out, Moment{Type: typeRunCancelled, Data: map[string]any{"reason": "deleting"}})
		}
		out = append(out, Moment{Type: typeSessionEnded, Data: map[string]any{"reason": "killed"}})
	}
	return out
}
