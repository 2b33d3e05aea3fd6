package vendormap

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

const typeSessionStarted = "session.started"

// primaryResult is a known record's fate in primary mode: a core event,
// nothing (none), or neither, which keeps the companion type.
type primaryResult struct {
	core *Mapped
	none bool
}

var companionType = primaryResult{}

func codexPrimary(suffix string, rec Record, opts Options) primaryResult {
	attrs := rec.Attributes
	switch suffix {
	case "conversation_starts":
		return sessionStarted(Codex, stringAttr(attrs, attrModel))
	case "tool_result":
		return toolOutcome(rec, opts, toolFacts{
			name:    stringAttr(attrs, "tool_name"),
			callID:  stringAttr(attrs, "call_id"),
			errText: firstString(attrs, "error", "error.message"),
			// The pinned codex failure carries no duration; the success does.
			durationOnFailure: false,
		})
	case "tool_decision":
		return codexDecision(attrs)
	}
	// Prompt and transport internals stay vendor-namespaced in both modes.
	return companionType
}

// codexDecision: a deny by config is a policy block, one by automation (the
// vendor's automated reviewer) a runtime block. A user's deny is a human
// decision already made in the CLI and an approval is no event: primary
// emits nothing for either (the companion family still carries them).
func codexDecision(attrs map[string]any) primaryResult {
	tool := stringAttr(attrs, "tool_name")
	var by string
	switch strings.ToLower(stringAttr(attrs, "source")) {
	case "config":
		by = "policy"
	case "automation", "automated_reviewer", "automatedreviewer":
		by = "runtime"
	}
	// Spellings across versions: deny (the fixture), denied, abort and
	// denied_with_network_policy_deny (ReviewDecision lower-cased or made
	// opaque); timed_out and the approvals are no denial.
	decision := strings.ToLower(stringAttr(attrs, "decision"))
	if !strings.HasPrefix(decision, "deny") && !strings.HasPrefix(decision, "denied") && decision != "abort" {
		by = ""
	}
	if by == "" || tool == "" {
		return primaryResult{none: true}
	}
	return primaryResult{core: &Mapped{
		Type:    "tool.denied",
		Subject: tool,
		Data:    map[string]any{"tool": toolObject(tool, stringAttr(attrs, "call_id")), "by": by},
	}}
}

func vscodePrimary(suffix string, rec Record, opts Options) primaryResult {
	attrs := rec.Attributes
	switch suffix {
	case "session.start":
		return sessionStarted(VSCode, stringAttr(attrs, attrRequestModel))
	case "tool.call":
		return toolOutcome(rec, opts, toolFacts{
			name:              stringAttr(attrs, "gen_ai.tool.name"),
			errType:           stringAttr(attrs, "error.type"),
			errText:           stringAttr(attrs, "error.message"),
			durationOnFailure: true,
		})
	}
	// Turns, inference details and edit feedback have no core moment here:
	// no run identity exists on this channel.
	return companionType
}

func sessionStarted(v Vendor, model string) primaryResult {
	data := map[string]any{"client": map[string]any{"name": string(v)}}
	if model != "" {
		data[attrRequestModel] = model
	}
	return primaryResult{core: &Mapped{Type: typeSessionStarted, Data: data}}
}

type toolFacts struct {
	name, callID      string
	errType, errText  string
	durationOnFailure bool
}

// toolOutcome is tool.completed or tool.failed by the record's success
// flag. A record without a tool name or a readable flag keeps its
// companion type rather than guess.
func toolOutcome(rec Record, opts Options, f toolFacts) primaryResult {
	success, ok := boolAttr(rec.Attributes, "success")
	if !ok || f.name == "" {
		return companionType
	}
	data := map[string]any{"tool": toolObject(f.name, f.callID)}
	duration, hasDuration := durationAttr(rec.Attributes)
	if success {
		if hasDuration {
			data["duration_ms"] = duration
		}
		return primaryResult{core: &Mapped{Type: "tool.completed", Subject: f.name, Data: data}}
	}
	if hasDuration && f.durationOnFailure {
		data["duration_ms"] = duration
	}
	// The channel exposes free text, not a taxonomy: the type is the
	// vendor's error.type token where it sends one, else synthesized.
	errObj := map[string]any{"type": "tool_error"}
	if f.errType != "" {
		errObj["type"] = f.errType
	}
	if f.errText != "" {
		if msg, ok := gatedValue(f.errText, aep.CaptureRedacted, opts); ok {
			errObj["message"] = msg
		}
	}
	data["error"] = errObj
	return primaryResult{core: &Mapped{Type: "tool.failed", Subject: f.name, Data: data}}
}

func toolObject(name, callID string) map[string]any {
	tool := map[string]any{"name": name}
	if callID != "" {
		tool["call_id"] = callID
	}
	return tool
}

func stringAttr(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s := stringAttr(m, k); s != "" {
			return s
		}
	}
	return ""
}

// boolAttr reads a flag sent as a bool (VS Code) or as its text (Codex
// formats every field with Display: "true", "false").
func boolAttr(m map[string]any, key string) (bool, bool) {
	switch v := m[key].(type) {
	case bool:
		return v, true
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		return b, err == nil
	}
	return false, false
}

// durationAttr reads duration_ms, sent as an integer (VS Code), a double,
// or its text (Codex), as the non-negative integer AEP's duration_ms is.
func durationAttr(m map[string]any) (json.Number, bool) {
	n, ok := countAttr(m, "duration_ms")
	if !ok {
		return "", false
	}
	return count(n), true
}
