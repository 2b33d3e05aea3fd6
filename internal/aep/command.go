package aep

import "strings"

// IsCommand reports whether an event type is a command (AEP-0004 §2):
// control.{imperative}, or x.{vendor}.control.{verb} under the §5
// extension rule. The acks control.accepted and control.rejected are the
// target's own session events, not commands. The test is by form, not by
// registry, so that a command type this build does not know (a newer core
// verb, another vendor's) is still one: an emitter never sends any, and
// no data path admits one.
func IsCommand(eventType string) bool {
	if verb, ok := strings.CutPrefix(eventType, "control."); ok {
		return verb != "accepted" && verb != "rejected"
	}
	rest, ok := strings.CutPrefix(eventType, "x.")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, ".")
	return ok && strings.HasPrefix(rest, "control.")
}
