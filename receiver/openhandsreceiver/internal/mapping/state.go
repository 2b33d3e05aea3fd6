package mapping

// State is the part of a Conversation that survives a restart: everything
// later outputs depend on, as plain data. The receiver holds it in its
// session's stored state, beside the session's positions and its socket
// cursor; the Conversation mutates it there (NewConversation), so storing
// it is copying it, and restoring it is building a Conversation on it.
//
// What is not here is rebuilt: the Config, the connect-snapshot flag (one
// call's worth) and an open delta stream (a restored conversation starts
// with none; the held-back tail of a stream open at the crash is lost,
// which the redactor accepts: it never leaks, it only drops).
//
// Adding a field: give it a json tag with omitempty and make its zero
// value mean what a state written before the field existed meant, so an
// older state decodes to the right thing without a migration.
type State struct {
	// Status is the last execution_status seen, "" before the first.
	Status string `json:"status,omitempty"`
	// Runs counts the runs opened so far (the n of run:<conversation>:<n>).
	Runs int `json:"runs,omitempty"`
	// Run is the open run's id, "" when none is open.
	Run string `json:"run,omitempty"`
	// RunStartedID is the id of the open run's run.started.
	RunStartedID string `json:"run_started_id,omitempty"`
	// Attention is the id of the pending attention.requested, "" if none.
	Attention string `json:"attention,omitempty"`
	// StartedID is the id of session.started, "" before it was emitted.
	StartedID string `json:"started_id,omitempty"`
	// Ended reports whether session.ended was emitted.
	Ended bool `json:"ended,omitempty"`
	// Children are the started child conversations not yet shown stopped,
	// each with its delegation.subagent.started id.
	Children map[string]string `json:"children,omitempty"`
}
