package mapping

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// mapKind maps one durable vendor event by kind. A core mapping whose
// required vendor fields are missing or mistyped degrades to the vendor
// plane, like an unknown kind: visibility, never a crash or a guess.
func (c *Conversation) mapKind(e *emission, ev Event, o origin) {
	f := ev.Fields
	mapped := false
	switch ev.kind {
	case "ActionEvent":
		mapped = c.mapAction(e, f, o)
	case "ObservationEvent":
		mapped = c.mapObservation(e, f, o)
	case "UserRejectObservation":
		mapped = c.mapUserReject(e, ev, o)
	case "AgentErrorEvent":
		mapped = c.mapAgentError(e, f, o)
	case "MessageEvent":
		c.mapMessage(e, ev, o)
		mapped = true
	case "Condensation":
		c.mapCondensation(e, f, o)
		mapped = true
	case "ConversationErrorEvent":
		c.mapConversationError(e, f, o)
		mapped = true
	case "ConversationStateUpdateEvent":
		mapped = c.mapStateUpdate(e, f, o)
	}
	if !mapped {
		c.mapVendor(e, ev, o)
	}
}

// mapAction: ActionEvent → tool.requested. The digest is over the original
// action object; the action itself rides at args_redacted (redacted) or
// args (full). thought, reasoning_content, thinking_blocks and summary have
// no annotated tool.requested field and never ride.
func (c *Conversation) mapAction(e *emission, f map[string]any, o origin) bool {
	name := str(f, "tool_name")
	if name == "" {
		return false
	}
	out := e.emit("tool.requested", o)
	out.Subject = name
	out.Step = str(f, "llm_response_id")
	set(out, "tool", toolRef(f))
	if risk := str(f, "security_risk"); risk != "" && risk != "UNKNOWN" {
		set(out, "risk", risk)
	}
	action, ok := f["action"].(map[string]any)
	if !ok {
		return true // null when the LLM's call was invalid
	}
	if d, err := aep.Digest(action); err == nil {
		set(out, "args_digest", d)
	}
	if args, ok := c.value(out, action); ok {
		if obj, ok := args.(map[string]any); ok {
			set(out, contentField(out, "args"), obj)
		}
	}
	return true
}

// mapObservation: ObservationEvent → the is_error split. The observation's
// text (its text content items joined, as the vendor's own rendering joins
// them) is the digested result, or the failure's error.message.
func (c *Conversation) mapObservation(e *emission, f map[string]any, o origin) bool {
	name := str(f, "tool_name")
	obs, ok := f["observation"].(map[string]any)
	if name == "" || !ok {
		return false
	}
	text := contentText(obs["content"])
	if isError, _ := obs["is_error"].(bool); isError {
		c.toolFailed(e, f, o, name, "tool_error", text)
		return true
	}
	out := e.emit("tool.completed", o)
	out.Subject = name
	set(out, "tool", toolRef(f))
	if d, err := aep.Digest(text); err == nil {
		set(out, "result_digest", d)
	}
	if r, ok := c.text(out, text); ok {
		set(out, contentField(out, "result"), r)
	}
	if name == startChildTool {
		c.subagentStarted(e, f, obs, o, out)
	}
	return true
}

// mapAgentError: AgentErrorEvent → tool.failed; it extends the observation
// base, so tool_call_id joins it to the call.
func (c *Conversation) mapAgentError(e *emission, f map[string]any, o origin) bool {
	name := str(f, "tool_name")
	if name == "" {
		return false
	}
	c.toolFailed(e, f, o, name, "agent_error", str(f, "error"))
	return true
}

func (c *Conversation) toolFailed(e *emission, f map[string]any, o origin, name, errType, message string) {
	out := e.emit("tool.failed", o)
	out.Subject = name
	set(out, "tool", toolRef(f))
	info := map[string]any{"type": errType}
	if m, ok := c.text(out, message); ok && m != "" {
		info["message"] = m
	}
	set(out, "error", info)
}

// mapUserReject: a hook rejection is a policy block (tool.denied by
// policy); a user rejection is a human decision the tool.denied vocabulary
// cannot name, so it stays on the vendor plane, with the tool at metadata.
func (c *Conversation) mapUserReject(e *emission, ev Event, o origin) bool {
	f := ev.Fields
	name := str(f, "tool_name")
	if name == "" {
		return false
	}
	var out *aep.Event
	if str(f, "rejection_source") == "hook" {
		out = e.emit("tool.denied", o)
		set(out, "by", "policy")
	} else {
		out = c.mapVendor(e, ev, o)
	}
	out.Subject = name
	set(out, "tool", toolRef(f))
	return true
}

// mapMessage: MessageEvent → x.openhands.message.event (the core message.*
// types are reserved). Role, sender and the skill count ride at metadata.
func (c *Conversation) mapMessage(e *emission, ev Event, o origin) {
	f := ev.Fields
	out := c.mapVendor(e, ev, o)
	out.Step = str(f, "llm_response_id")
	if msg, ok := f["llm_message"].(map[string]any); ok {
		if role := str(msg, "role"); role != "" {
			set(out, "role", role)
		}
	}
	if sender := str(f, "sender"); sender != "" {
		set(out, "sender", sender)
	}
	if skills, ok := f["activated_skills"].([]any); ok {
		set(out, "skills", count(skills))
	}
}

// mapCondensation: Condensation → session.compacted. The summary has no
// annotated field in the schema and never rides; no step, although the
// input carries llm_response_id (pinned).
func (c *Conversation) mapCondensation(e *emission, f map[string]any, o origin) {
	out := e.emit("session.compacted", o)
	if forgotten, ok := f["forgotten_event_ids"].([]any); ok {
		set(out, "forgotten", count(forgotten))
	}
}

// mapConversationError: ConversationErrorEvent → error.raised, the code at
// metadata and the detail as error.message. The run close itself comes
// from the status plane.
func (c *Conversation) mapConversationError(e *emission, f map[string]any, o origin) {
	out := e.emit("error.raised", o)
	if code := str(f, "code"); code != "" {
		set(out, "code", code)
	}
	if detail := str(f, "detail"); detail != "" {
		if m, ok := c.text(out, detail); ok {
			set(out, "error", map[string]any{"message": m})
		}
	}
}

// mapStateUpdate: ConversationStateUpdateEvent → state.snapshot (key
// full_state; the state at data.state) or state.delta (data.key, and the
// new value as the one-op JSON Patch [{op: replace, path: /<key>, value}]
// at data.delta), plus the run synthesis its execution_status implies.
func (c *Conversation) mapStateUpdate(e *emission, f map[string]any, o origin) bool {
	key, ok := f["key"].(string)
	if !ok || key == "" {
		return false
	}
	value := f["value"] // absent when the new value is None (exclude_none)
	emitState := func() {
		if key == "full_state" {
			out := e.emit("state.snapshot", o)
			if state, ok := value.(map[string]any); ok {
				if r, ok := c.value(out, state); ok {
					if obj, ok := r.(map[string]any); ok {
						set(out, "state", obj)
					}
				}
			}
			return
		}
		c.emitDelta(e, o, key, value)
	}
	if next, ok := executionStatus(key, value); ok && !(key == "full_state" && c.staleSnapshot) {
		c.applyStatus(e, o, next, emitState)
	} else {
		emitState()
	}
	return true
}

// emitDelta emits state.delta: data.key, and the new value as the one-op
// JSON Patch [{op: replace, path: /<key>, value}] at data.delta.
func (c *Conversation) emitDelta(e *emission, o origin, key string, value any) {
	out := e.emit("state.delta", o)
	set(out, "key", key)
	// Redacting {key: value} rather than value lets a redactor that
	// judges by key name (credential-named keys) see the name.
	if r, ok := c.value(out, map[string]any{key: value}); ok {
		if obj, ok := r.(map[string]any); ok {
			set(out, "delta", []any{map[string]any{
				"op": "replace", "path": "/" + pointerToken(key), "value": obj[key],
			}})
		}
	}
}

// executionStatus reads the status a state update reports, from either
// shape: key execution_status, or value.execution_status of full_state.
// An empty one reports none: "" is the State's "before the first".
func executionStatus(key string, value any) (string, bool) {
	var s any
	switch key {
	case "execution_status":
		s = value
	case "full_state":
		state, _ := value.(map[string]any)
		s = state["execution_status"]
	}
	status, _ := s.(string)
	return status, status != ""
}

// mapVendor maps a kind onto the vendor plane. At metadata the event
// carries only the vendor stamps (and what the caller adds); above it,
// data.payload holds the vendor event minus kind, id and timestamp (the
// envelope and the stamps carry those) and minus every thought/reasoning
// field, which no schema field is annotated to hold. Vendor types have no
// schema, so downstream hops drop their whole data above metadata.
//
// The payload is built only at a level it rides at, and at full it is
// already a copy of its own (as value would give).
func (c *Conversation) mapVendor(e *emission, ev Event, o origin) *aep.Event {
	out := e.emit(VendorType(ev.kind), o)
	switch out.Capture {
	case aep.CaptureRedacted:
		set(out, "payload", c.cfg.Redactor.Value(vendorPayload(ev.Fields)))
	case aep.CaptureFull:
		set(out, "payload", vendorPayload(ev.Fields))
	}
	return out
}

// envelopeFields are carried by the envelope and the vendor stamps.
var envelopeFields = map[string]bool{"kind": true, "id": true, "timestamp": true}

// reasoningFields hold model thought, wherever they nest (ActionEvent and
// llm_message alike).
var reasoningFields = map[string]bool{
	"thought": true, "reasoning_content": true, "thinking_blocks": true, "responses_reasoning_item": true,
}

func vendorPayload(fields map[string]any) map[string]any {
	p := make(map[string]any, len(fields))
	for k, v := range fields {
		if !envelopeFields[k] && !reasoningFields[k] {
			p[k] = withoutReasoning(v)
		}
	}
	return p
}

// withoutReasoning copies v without reasoning fields at any depth.
func withoutReasoning(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			if !reasoningFields[k] {
				m[k] = withoutReasoning(x)
			}
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = withoutReasoning(x)
		}
		return s
	default:
		return v
	}
}

// contentField names the field content rides in when a schema splits it by
// level: <base>_redacted at redacted, <base> at full.
func contentField(out *aep.Event, base string) string {
	if out.Capture == aep.CaptureRedacted {
		return base + "_redacted"
	}
	return base
}

// contentText is an observation's text: a plain string, or its text items
// concatenated in order.
func contentText(content any) string {
	switch t := content.(type) {
	case string:
		return t
	case []any:
		var text []string
		for _, item := range t {
			if m, ok := item.(map[string]any); ok && str(m, "type") == "text" {
				text = append(text, str(m, "text"))
			}
		}
		return strings.Join(text, "") // the one item itself, when there is one
	default:
		return ""
	}
}

// toolRef is data.tool: the event's tool_name, which its caller found a
// nonempty string, and its tool_call_id if it has one. The values are the
// decoded event's own, not converted anew.
func toolRef(f map[string]any) map[string]any {
	if str(f, "tool_call_id") == "" {
		return map[string]any{"name": f["tool_name"]}
	}
	return map[string]any{"name": f["tool_name"], "call_id": f["tool_call_id"]}
}

// pointerToken escapes a key as a JSON Pointer token (RFC 6901).
var pointerToken = strings.NewReplacer("~", "~0", "/", "~1").Replace

// count is a JSON integer, as json.Number like every decoded number.
func count(items []any) json.Number { return json.Number(strconv.Itoa(len(items))) }

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}
