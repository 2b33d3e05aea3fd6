package capture

import (
	"encoding/json"
	"strconv"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Downlevel returns ev as a hop may forward it under ceiling (AEP-0001
// §8.2): fields annotated above the new level are dropped, [metadata*]
// fields degrade structurally below redacted, and capture is rewritten.
// It never up-levels and never mutates ev; when nothing needs to change it
// returns ev itself, so a caller that goes on to modify the result must
// Clone it first.
//
// The new level is the lower of ev's capture and ceiling, except that a
// full event under a redacted ceiling lands on metadata: redacted claims
// that free text passed the §9.4 pipeline, and a mechanical hop cannot
// mint that claim (§8.2e). Types without a payload schema (all x.*) lose
// data wholesale, and ceiling none keeps the envelope only.
//
// An unknown ceiling counts as metadata (the default posture, §8.2d); an
// unknown capture on ev counts as full, since nothing it carries can be
// trusted to be gated.
func Downlevel(ev *aep.Event, ceiling aep.Capture) *aep.Event {
	if ev == nil {
		return nil
	}
	from := ev.EffectiveCapture()
	if from.Rank() < 0 {
		from = aep.CaptureFull
	}
	if ceiling.Rank() < 0 {
		ceiling = aep.CaptureMetadata
	}
	if ceiling.Allows(from) {
		return ev
	}
	to := ceiling
	if to == aep.CaptureRedacted && from == aep.CaptureFull {
		to = aep.CaptureMetadata
	}

	shell := *ev
	shell.Data = nil
	out := shell.Clone()
	out.Capture = to
	if ev.Data == nil || to == aep.CaptureNone {
		return out
	}
	t, ok := lookupType(ev.Type)
	if !ok {
		return out
	}
	p := pruner{ev: ev, to: to, structural: to.Rank() < aep.CaptureRedacted.Rank()}
	out.Data = p.object(ev.Data, t.root, -1)
	return out
}

// pruner walks one event's data against its annotation tree.
type pruner struct {
	ev *aep.Event
	to aep.Capture
	// structural is set below redacted, where [metadata*] fields degrade.
	structural bool
}

// object prunes one JSON object; index is its 0-based position in a parent
// array, or -1.
func (p pruner) object(m map[string]any, f *field, index int) map[string]any {
	out := make(map[string]any, len(m))
	for key, v := range m {
		child, annotated := f.props[key]
		if !annotated {
			out[key] = aep.CloneValue(v) // unannotated fields are [m] (AEP-0002 §5.1 rule 4)
			continue
		}
		if !p.to.Allows(child.level) {
			continue
		}
		if kept, ok := p.value(v, child, -1); ok {
			out[key] = kept
		}
	}
	if p.structural {
		for key, child := range f.props {
			if _, present := out[key]; present && child.degrade != degradeNone {
				p.degradeField(out, key, child.degrade, index)
			}
		}
	}
	return out
}

// value prunes one annotated value; index is its position in a parent
// array, or -1. A value whose shape contradicts its schema cannot be
// walked, so it is dropped rather than trusted.
func (p pruner) value(v any, f *field, index int) (any, bool) {
	switch {
	case f.props != nil:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		return p.object(m, f, index), true
	case f.items != nil:
		items, ok := v.([]any)
		if !ok {
			return nil, false
		}
		out := make([]any, 0, len(items))
		if !p.to.Allows(f.items.level) {
			return out, true
		}
		for i, item := range items {
			if kept, ok := p.value(item, f.items, i); ok {
				out = append(out, kept)
			}
		}
		return out, true
	default:
		return aep.CloneValue(v), true
	}
}

func (p pruner) degradeField(obj map[string]any, key string, how degrade, index int) {
	switch how {
	case degradePrompt:
		obj[key] = p.synthesizedPrompt(obj)
	case degradeLabelToID:
		if id, ok := obj["id"].(string); ok && id != "" {
			obj[key] = id
		} else if index >= 0 {
			obj[key] = strconv.Itoa(index + 1)
		} else {
			delete(obj, key)
		}
	case degradeStructuralEntries:
		m, ok := obj[key].(map[string]any)
		if !ok {
			delete(obj, key)
			return
		}
		kept := make(map[string]any, len(m))
		for k, v := range m {
			if isNumberOrBool(v) {
				kept[k] = v
			}
		}
		obj[key] = kept
	default:
		delete(obj, key)
	}
}

// synthesizedPrompt is the AEP-0003 §9.2 metadata prompt, built from
// structural metadata only: "{agent} requests {kind}: {subject}".
func (p pruner) synthesizedPrompt(data map[string]any) string {
	agent := p.ev.Agent
	if agent == "" {
		agent = "agent"
	}
	kind, _ := data["kind"].(string)
	if kind == "" {
		kind = "attention"
	}
	s := agent + " requests " + kind
	if p.ev.Subject != "" {
		s += ": " + p.ev.Subject
	}
	return s
}

func isNumberOrBool(v any) bool {
	switch v.(type) {
	case json.Number, bool, float64, float32, int, int64, int32, uint, uint64, uint32:
		return true
	default:
		return false
	}
}
