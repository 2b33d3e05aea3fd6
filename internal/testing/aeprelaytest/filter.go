package aeprelaytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// errInvalidFilter is wrapped by every filter refusal (code
// invalid-filter, AEP-0003 §6.5).
var errInvalidFilter = errors.New("invalid-filter")

// filter is a parsed attr-match filter (AEP-0003 §6): it matches an Event
// when every predicate does. The zero filter matches everything.
type filter struct{ preds []predicate }

// predicate is one member of a filter.
type predicate struct {
	attr string
	// values: any-of equality, each a string, int64 or bool.
	values []any
	// prefixes: type patterns "p.*", stored as "p.".
	prefixes []string
	// severity comparison: inclusive ranks, each bound optional.
	severityCmp    bool
	sevMin, sevMax int
	hasMin, hasMax bool
}

// filterableCore are the core attributes a filter may name (§6.2 rule 1).
var filterableCore = map[string]bool{
	"id": true, "type": true, "subject": true, "source": true, "agent": true,
	"session": true, "run": true, "step": true, "epoch": true, "cause": true,
	"severity": true, "capture": true,
}

var extensionName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// parseFilterJSON parses a filter from its JSON text.
func parseFilterJSON(raw []byte) (filter, error) {
	v, err := aep.DecodeValue(raw)
	if err != nil {
		return filter{}, fmt.Errorf("%w: filter is not JSON: %v", errInvalidFilter, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return filter{}, fmt.Errorf("%w: filter must be a JSON object", errInvalidFilter)
	}
	return parseFilter(m)
}

// parseFilter parses a decoded filter object (numbers as json.Number).
// It fails closed: an illegal key or predicate refuses the whole filter.
func parseFilter(m map[string]any) (filter, error) {
	var f filter
	for _, attr := range slices.Sorted(maps.Keys(m)) {
		if !filterableCore[attr] && (aep.IsCoreAttribute(attr) || !extensionName.MatchString(attr)) {
			return filter{}, fmt.Errorf("%w: %q is not a filterable attribute", errInvalidFilter, attr)
		}
		p, err := parsePredicate(attr, m[attr])
		if err != nil {
			return filter{}, fmt.Errorf("%w: %q: %v", errInvalidFilter, attr, err)
		}
		f.preds = append(f.preds, p)
	}
	return f, nil
}

func parsePredicate(attr string, v any) (predicate, error) {
	p := predicate{attr: attr}
	switch t := v.(type) {
	case map[string]any:
		if attr != "severity" {
			return p, errors.New("comparisons apply to severity only")
		}
		return parseSeverityCmp(p, t)
	case []any:
		if len(t) == 0 {
			return p, errors.New("an inclusion array needs at least one value")
		}
		for _, x := range t {
			if err := p.add(x); err != nil {
				return p, err
			}
		}
		return p, nil
	default:
		return p, p.add(v)
	}
}

// add adds one scalar (or, on type, a pattern) to an any-of predicate.
func (p *predicate) add(v any) error {
	switch t := v.(type) {
	case string:
		if !strings.Contains(t, "*") {
			p.values = append(p.values, t)
			return nil
		}
		prefix, ok := strings.CutSuffix(t, ".*")
		if p.attr != "type" || !ok || prefix == "" || strings.Contains(prefix, "*") {
			return fmt.Errorf("%q: patterns are only \"prefix.*\" on type", t)
		}
		p.prefixes = append(p.prefixes, prefix+".")
		return nil
	case json.Number:
		n, err := t.Int64()
		if err != nil {
			return fmt.Errorf("%s: numbers must be integers", t)
		}
		p.values = append(p.values, n)
		return nil
	case bool:
		p.values = append(p.values, t)
		return nil
	default:
		return errors.New("values must be strings, integers or booleans")
	}
}

func parseSeverityCmp(p predicate, m map[string]any) (predicate, error) {
	if len(m) == 0 {
		return p, errors.New("a comparison needs gte, lte or both")
	}
	p.severityCmp = true
	for op, v := range m {
		s, _ := v.(string)
		rank := aep.Severity(s).Rank()
		if rank < 0 {
			return p, fmt.Errorf("%s: %v is not a severity level", op, v)
		}
		switch op {
		case "gte":
			p.sevMin, p.hasMin = rank, true
		case "lte":
			p.sevMax, p.hasMax = rank, true
		default:
			return p, fmt.Errorf("%q is not a comparison (gte, lte)", op)
		}
	}
	return p, nil
}

// match applies the filter (§6.2).
func (f filter) match(ev *aep.Event) bool {
	for _, p := range f.preds {
		if !p.match(ev) {
			return false
		}
	}
	return true
}

func (p predicate) match(ev *aep.Event) bool {
	v, present := attribute(ev, p.attr)
	if !present {
		return false
	}
	if p.severityCmp {
		rank := ev.EffectiveSeverity().Rank()
		return rank >= 0 && (!p.hasMin || rank >= p.sevMin) && (!p.hasMax || rank <= p.sevMax)
	}
	if slices.Contains(p.values, v) {
		return true
	}
	s, _ := v.(string)
	return slices.ContainsFunc(p.prefixes, func(prefix string) bool { return strings.HasPrefix(s, prefix) })
}

// attribute returns an Event's attribute for matching, with the defaults
// of epoch, severity and capture applied (§6.2 rule 5).
func attribute(ev *aep.Event, name string) (any, bool) {
	switch name {
	case "epoch":
		return ev.EffectiveEpoch(), true
	case "severity":
		return string(ev.EffectiveSeverity()), true
	case "capture":
		return string(ev.EffectiveCapture()), true
	case "aep", "time", "traceparent":
		return nil, false // not filterable (§6.2)
	}
	if s, core := ev.StringAttribute(name); core {
		return s, s != ""
	}
	v, ok := ev.Extensions[name]
	if n, isNum := v.(json.Number); isNum {
		i, err := n.Int64()
		return i, ok && err == nil
	}
	return v, ok
}
