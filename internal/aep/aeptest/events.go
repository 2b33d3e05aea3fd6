package aeptest

import "github.com/otelcol-openhands/otelcol-openhands/internal/aep"

// RunStarted is a valid run.started of the openhands agent in session, at
// seq, with the event id and run id given.
func RunStarted(session string, seq int64, id, run string) *aep.Event {
	return &aep.Event{
		AEP:     aep.Version,
		ID:      id,
		Type:    "run.started",
		Time:    "2026-07-12T08:15:00.301Z",
		Source:  "aep://otelcol-test/agent/openhands/session/" + session,
		Agent:   "openhands",
		Session: session,
		Run:     run,
		Seq:     aep.Int64(seq),
		Epoch:   aep.Int64(0),
		Capture: aep.CaptureMetadata,
		Data:    map[string]any{"trigger": "user"},
	}
}

// MakeAttentionRequest turns ev into an attention.requested at capture
// full, whose prompt and option labels are free text, and returns it.
func MakeAttentionRequest(ev *aep.Event) *aep.Event {
	ev.Type, ev.Subject, ev.Run = "attention.requested", "Bash", ""
	ev.Severity, ev.Capture = aep.SeverityNotice, aep.CaptureFull
	ev.Data = map[string]any{
		"kind":        "permission",
		"prompt":      "Permission requested: Bash — rm -rf build/",
		"options":     []any{map[string]any{"id": "allow", "label": "Allow"}, map[string]any{"id": "deny", "label": "Deny"}},
		"respond_via": []any{"control"},
	}
	return ev
}
