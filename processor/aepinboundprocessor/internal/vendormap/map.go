package vendormap

import (
	"slices"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Mode picks which AEP types the channel emits.
type Mode string

const (
	// ModeCompanion (the default) emits every record as x.{agent}.otel.*
	// and no core type: a hook adapter, if one runs, is the core-type
	// authority.
	ModeCompanion Mode = "companion"
	// ModePrimary emits the core subset (session.started, tool outcomes,
	// Codex's policy denials) where no hook adapter runs.
	ModePrimary Mode = "primary"
)

// Redactor runs the AEP-0003 §9.4 pipeline over content kept at redacted.
type Redactor interface {
	Text(s string) string
	Value(v any) any
}

// Options are one mapping's settings.
type Options struct {
	Mode Mode
	// Ceiling is the capture level events are emitted at; "" is metadata.
	Ceiling aep.Capture
	// Redactor is used at the redacted level; without one, content that
	// needs it is left out.
	Redactor Redactor
	// SessionStarted is set once the session has had its session.started
	// in this epoch: a later start record (VS Code starts one per chat in
	// the same window session) stays in the companion family.
	SessionStarted bool
}

func (o Options) level() aep.Capture {
	if o.Ceiling == "" {
		return aep.CaptureMetadata
	}
	return o.Ceiling
}

// Mapped is the record's event, without the envelope the processor adds.
type Mapped struct {
	Type    string
	Subject string
	Data    map[string]any
	Capture aep.Capture
}

// Classify says which of the enabled vendors' records rec is: by its event
// name's prefix, else by its resource's service.name (for the GenAI
// convention's events a vendor also emits).
func Classify(rec Record, enabled []Vendor) (Vendor, bool) {
	name := rec.name()
	for _, v := range enabled {
		if p, ok := profiles[v]; ok && strings.HasPrefix(name, p.prefix) {
			return v, true
		}
	}
	service := stringAttr(rec.Resource, attrServiceName)
	for _, v := range enabled {
		if p, ok := profiles[v]; ok && slices.Contains(p.serviceNames, service) {
			return v, true
		}
	}
	return "", false
}

// Session is the AEP session of a vendor's record (Codex: the record's
// conversation.id; VS Code: the resource's session.id), "" when absent.
func Session(v Vendor, rec Record) string {
	return profiles[v].sessionFrom(rec)
}

// HostName is the resource host.name, "" when absent.
func HostName(rec Record) string { return stringAttr(rec.Resource, attrHostName) }

// Map maps one record of vendor v. ok is false when the mode emits nothing
// for it (a user's deny in primary mode).
func Map(v Vendor, rec Record, opts Options) (Mapped, bool) {
	p := profiles[v]
	level := opts.level()
	name := rec.name()
	suffix, known := p.companion[name]
	if !known {
		// Nothing is guessed about a name the profile does not document.
		m := Mapped{Type: vendorType(v, "unknown"), Capture: level}
		if level != aep.CaptureNone {
			m.Data = map[string]any{}
			if name != "" {
				m.Data[attrEventName] = name
			}
		}
		return m, true
	}
	if opts.Mode == ModePrimary {
		r := p.primary(suffix, rec, opts)
		switch {
		case r.none:
			return Mapped{}, false
		case r.core != nil && !(r.core.Type == typeSessionStarted && opts.SessionStarted):
			m := *r.core
			m.Capture = level
			if level == aep.CaptureNone {
				m.Data = nil
			}
			return m, true
		}
	}
	data := p.companionData(rec, opts)
	if data != nil && p.usage != nil {
		p.usage(suffix, data, rec.Attributes)
	}
	return Mapped{Type: vendorType(v, suffix), Data: data, Capture: level}, true
}

func vendorType(v Vendor, suffix string) string { return "x." + string(v) + ".otel." + suffix }

// companionData is the record's attributes minus the envelope ones, with
// content kept only where the ceiling allows it.
func (p *profile) companionData(rec Record, opts Options) map[string]any {
	level := opts.level()
	if level == aep.CaptureNone {
		return nil
	}
	data := make(map[string]any, len(rec.Attributes))
	session := p.sessionFrom(rec)
	for k, v := range rec.Attributes {
		if p.envelope[k] || k == attrSessionID && v == session {
			continue
		}
		need, isGated := p.gated[k]
		if !isGated {
			data[k] = v
			continue
		}
		if kept, ok := gatedValue(v, need, opts); ok {
			data[k] = kept
		}
	}
	return data
}

// redactedPlaceholder is what Codex sends in place of a prompt it was told
// not to log: not content, and not worth a field.
const redactedPlaceholder = "[REDACTED]"

// gatedValue is v as it may ride at the options' ceiling, if at all:
// raw at full, through the redaction pipeline at redacted.
func gatedValue(v any, need aep.Capture, opts Options) (any, bool) {
	level := opts.level()
	if !level.Allows(need) || v == redactedPlaceholder {
		return nil, false
	}
	if level == aep.CaptureFull {
		return v, true
	}
	if opts.Redactor == nil {
		return nil, false
	}
	if s, ok := v.(string); ok {
		return opts.Redactor.Text(s), true
	}
	return opts.Redactor.Value(v), true
}
