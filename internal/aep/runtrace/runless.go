package runtrace

import "github.com/otelcol-openhands/otelcol-openhands/internal/aep"

// LocateWithoutRun places a tool call or attention wait that belongs to no
// run as the root span of a trace of its own. Emitters that report tool
// calls without runs (Codex and the VS Code agent through the aepinbound
// processor, AEP emitters without run boundaries) give no span to hang
// them under: a session has no end on those channels, so a session root
// would never arrive and its trace would grow without bound. False for an
// event of a run (Locate places it) and for other types.
//
// The span is keyed as in a run (tool.call_id, else the tool.requested id;
// the attention.requested id), falling back to the event's own id for an
// answer that names no request, which is then a span of one event. The
// empty run in the id text never names a run: Locate refuses it.
func LocateWithoutRun(ev *aep.Event) (Position, bool) {
	if ev.Run != "" {
		return Position{}, false
	}
	kind, label, key := childKey(ev)
	if kind == KindRun {
		return Position{}, false
	}
	if key == "" {
		key = ev.ID
	}
	run := runKey{emitter(ev.Source), ""}
	return Position{Kind: kind, TraceID: labelledTraceID(run, label, key), SpanID: spanID(run, label, key)}, true
}
