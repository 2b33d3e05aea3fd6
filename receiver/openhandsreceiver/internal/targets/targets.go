// Package targets is the pure part of target discovery: it parses the
// target groups a source returns (Prometheus file_sd / http_sd), turns
// each listed endpoint and its labels into a Target, and compares the set
// of one refresh with the set being watched. It does no I/O: the sources
// and the key lookups are the receiver's.
package targets // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/targets"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
)

// The labels the receiver reads. Like Prometheus' own, labels starting
// with "__" are meta labels: they are never resource attributes and never
// logged (a key may be one).
const (
	// LabelScheme is the scheme of a target listed as host:port (default
	// http).
	LabelScheme = "__scheme__"
	// LabelKey carries the session key itself.
	LabelKey = "__openhands_session_api_key__"
	// LabelKeyFile names a file holding the key, inside the source's
	// session_api_key_dir.
	LabelKeyFile = "__openhands_session_api_key_file__"
	// LabelKeyEnv names an environment variable holding the key; the name
	// must start with the source's session_api_key_env_prefix.
	LabelKeyEnv = "__openhands_session_api_key_env__"
)

// Group is one entry of a Prometheus service-discovery document.
type Group struct {
	Targets []string          `json:"targets" yaml:"targets"`
	Labels  map[string]string `json:"labels" yaml:"labels"`
}

// KeySource says where a target's session key comes from.
type KeySource int

const (
	KeyNone   KeySource = iota // the server takes no key
	KeyInline                  // LabelKey
	KeyFile                    // LabelKeyFile
	KeyEnv                     // LabelKeyEnv
)

// KeyRef is where to find a target's key: the key itself (KeyInline), a
// file name or an environment variable name. It is compared, never
// printed: String hides the value.
type KeyRef struct {
	Source KeySource
	Value  string
}

// String names the source of the key without its value.
func (k KeyRef) String() string {
	return [...]string{"none", "label", "file", "env"}[k.Source]
}

// Target is one agent server a source lists.
type Target struct {
	// ID is the endpoint's identity (endpoint.Key): two spellings of one
	// server are one target.
	ID string
	// Endpoint is the base URL the server is reached at.
	Endpoint string
	Key      KeyRef
	// Attributes are the target's labels, meta labels left out: they
	// become resource attributes of its events.
	Attributes map[string]string
}

// Equal reports whether two listings of a target are the same target
// reached the same way.
func (t Target) Equal(o Target) bool {
	return t.ID == o.ID && t.Endpoint == o.Endpoint && t.Key == o.Key && maps.Equal(t.Attributes, o.Attributes)
}

// Limits bound what one refresh may hold.
type Limits struct {
	// MaxTargets is the most targets a document may list, all groups
	// together.
	MaxTargets int
	// MaxLabels is the most labels one group may carry.
	MaxLabels int
	// MaxValueBytes bounds one target string or label value.
	MaxValueBytes int
}

// labelName is a Prometheus label name.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Parse reads a file_sd document: a JSON array, or YAML (which file_sd
// also accepts). A document over a limit, or with a label name
// Prometheus would refuse, is refused whole, as Prometheus does: the
// caller keeps its last good set.
func Parse(data []byte, lim Limits) ([]Group, error) {
	trimmed := bytes.TrimSpace(data)
	// JSON, the common case, decodes fast; YAML (a superset) takes the rest.
	var groups []Group
	if len(trimmed) > 0 && trimmed[0] == '[' && json.Unmarshal(trimmed, &groups) == nil {
		return groups, lim.check(groups)
	}
	return parseYAML(trimmed, lim)
}

// ParseJSON reads an http_sd answer: JSON only, as Prometheus requires,
// so a remote source never reaches the YAML decoder.
func ParseJSON(data []byte, lim Limits) ([]Group, error) {
	var groups []Group
	if err := json.Unmarshal(data, &groups); err != nil {
		return nil, fmt.Errorf("not a JSON list of target groups: %w", err)
	}
	return groups, lim.check(groups)
}

// parseYAML holds every mapping of the document to MaxLabels keys before
// decoding it: the YAML decoder compares a mapping's keys pairwise, so
// one mapping of a million keys (8 MiB) would take it many minutes.
func parseYAML(data []byte, lim Limits) ([]Group, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a list of target groups: %w", err)
	}
	if doc.Kind == 0 {
		return nil, nil // an empty document lists no targets
	}
	if err := lim.checkMappings(&doc); err != nil {
		return nil, err
	}
	var groups []Group
	if err := doc.Decode(&groups); err != nil {
		return nil, fmt.Errorf("not a list of target groups: %w", err)
	}
	return groups, lim.check(groups)
}

// checkMappings refuses a mapping of more keys than a group's labels may
// have. An alias is not followed: its anchor is checked where it stands.
func (lim Limits) checkMappings(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode && len(n.Content)/2 > max(lim.MaxLabels, 2) {
		return fmt.Errorf("line %d: a mapping of more than %d keys", n.Line, max(lim.MaxLabels, 2))
	}
	for _, c := range n.Content {
		if err := lim.checkMappings(c); err != nil {
			return err
		}
	}
	return nil
}

// check holds groups to the limits.
func (lim Limits) check(groups []Group) error {
	listed := 0
	for i, g := range groups {
		listed += len(g.Targets)
		if listed > lim.MaxTargets {
			return fmt.Errorf("lists more than %d targets", lim.MaxTargets)
		}
		if len(g.Labels) > lim.MaxLabels {
			return fmt.Errorf("group %d: more than %d labels", i, lim.MaxLabels)
		}
		for name, value := range g.Labels {
			if !labelName.MatchString(name) {
				return fmt.Errorf("group %d: %q is not a label name", i, name)
			}
			if len(value) > lim.MaxValueBytes {
				return fmt.Errorf("group %d: label %s is longer than %d bytes", i, name, lim.MaxValueBytes)
			}
		}
		for _, t := range g.Targets {
			if len(t) > lim.MaxValueBytes {
				return fmt.Errorf("group %d: a target is longer than %d bytes", i, lim.MaxValueBytes)
			}
		}
	}
	return nil
}

// Resolve turns groups into targets, the first listing of an endpoint
// winning. A target that cannot be reached as listed (not host:port nor
// an http(s) URL, two key labels) is left out with an error that quotes
// no label value; the others stand.
func Resolve(groups []Group) ([]Target, []error) {
	var out []Target
	var errs []error
	seen := make(map[string]bool)
	for i, g := range groups {
		key, err := keyOf(g.Labels)
		if err != nil {
			errs = append(errs, fmt.Errorf("group %d: %w", i, err))
			continue
		}
		attrs := make(map[string]string, len(g.Labels))
		for name, value := range g.Labels {
			if !strings.HasPrefix(name, "__") {
				attrs[name] = value
			}
		}
		for j, listed := range g.Targets {
			base, err := baseURL(listed, g.Labels[LabelScheme])
			if err != nil {
				errs = append(errs, fmt.Errorf("group %d target %d: %w", i, j, err))
				continue
			}
			id := endpoint.Key(base)
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, Target{ID: id, Endpoint: base.String(), Key: key, Attributes: attrs})
		}
	}
	return out, errs
}

// keyOf reads the key labels: at most one may be set.
func keyOf(labels map[string]string) (KeyRef, error) {
	var ref KeyRef
	for _, l := range []struct {
		name   string
		source KeySource
	}{{LabelKey, KeyInline}, {LabelKeyFile, KeyFile}, {LabelKeyEnv, KeyEnv}} {
		v, ok := labels[l.name]
		if !ok || v == "" {
			continue
		}
		if ref.Source != KeyNone {
			return KeyRef{}, fmt.Errorf("more than one of %s, %s and %s", LabelKey, LabelKeyFile, LabelKeyEnv)
		}
		ref = KeyRef{Source: l.source, Value: v}
	}
	return ref, nil
}

// baseURL reads a listed target: host:port (Prometheus' form, the scheme
// from the __scheme__ label) or an http(s) base URL.
func baseURL(listed, scheme string) (*url.URL, error) {
	if !strings.Contains(listed, "://") {
		switch scheme {
		case "":
			scheme = "http"
		case "http", "https":
		default:
			return nil, errors.New(LabelScheme + " must be http or https")
		}
		listed = scheme + "://" + listed
	}
	return endpoint.ParseBase(listed)
}

// Diff compares the watched set with the set a refresh lists: the
// targets to attach (new, or listed differently: a new key or labels),
// and the ids of those to retire (gone, or listed differently).
func Diff(watched map[string]Target, listed []Target) (attach []Target, retire []string) {
	now := make(map[string]bool, len(listed))
	for _, t := range listed {
		now[t.ID] = true
		old, ok := watched[t.ID]
		switch {
		case !ok:
			attach = append(attach, t)
		case !old.Equal(t):
			retire = append(retire, t.ID)
			attach = append(attach, t)
		}
	}
	for id := range watched {
		if !now[id] {
			retire = append(retire, id)
		}
	}
	return attach, retire
}

// Merge joins the sets of several sources, the first to list an endpoint
// winning, and leaves out the ids in exclude (the static servers).
func Merge(exclude map[string]bool, sets ...[]Target) []Target {
	var out []Target
	seen := maps.Clone(exclude)
	if seen == nil {
		seen = make(map[string]bool)
	}
	for _, set := range sets {
		for _, t := range set {
			if !seen[t.ID] {
				seen[t.ID] = true
				out = append(out, t)
			}
		}
	}
	return out
}
