package capture

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Markers the AEP-0003 §9.4 pipeline writes in place of what it removes.
const (
	SecretMarker = "[REDACTED:secret]"
	PIIMarker    = "[REDACTED:pii]"
	homeMarker   = "~"
)

// minSecretRunes is the shortest operator-configured secret value that is
// redacted: a shorter one would blank ordinary words all over the text.
const minSecretRunes = 4

// RedactorConfig is the operator's part of the redaction pipeline. The
// pattern rules (AEP-0003 §9.4a) need no configuration.
type RedactorConfig struct {
	// SecretValues are literal secrets (rule b), typically the values of
	// the environment variables and config keys the operator lists as
	// secret (see SecretValuesFromEnv). Values shorter than four
	// characters are ignored.
	SecretValues []string
	// SecretKeys are object keys, beyond the credential-named ones, whose
	// values Value replaces whole (rule b's "config keys the operator lists
	// as secret"). Matched case-insensitively and exactly.
	SecretKeys []string
	// Home is the user's home directory (rule c), replaced by "~" wherever
	// it appears. /home/<u>, /Users/<u> and C:\Users\<u> are replaced
	// whether or not it is set.
	Home string
	// DisablePII turns rule d (e-mail addresses, phone numbers) off; it is
	// on by default.
	DisablePII bool
}

// SecretValuesFromEnv resolves the environment variables an operator names
// as secret to their values, for RedactorConfig.SecretValues. lookup is
// os.LookupEnv outside tests; unset and empty variables are skipped.
func SecretValuesFromEnv(names []string, lookup func(string) (string, bool)) []string {
	var values []string
	for _, name := range names {
		if v, ok := lookup(name); ok && v != "" {
			values = append(values, v)
		}
	}
	return values
}

// Redactor runs the AEP-0003 §9.4 pipeline in its normative order: secret
// patterns and operator-configured secret values, home paths, then PII.
// It redacts more than the floor where the conformance corpus asks for it
// (vendor token shapes, credential-named object keys, any user's home).
// The zero value applies the pattern rules with PII on. A Redactor is
// immutable and safe for concurrent use.
type Redactor struct {
	literals []string        // operator-configured secret values
	keys     map[string]bool // operator-named secret keys, lower case
	home     string
	noPII    bool
	// holdLiterals are the strings a stream must not split: the secret
	// values and a configured home, which may contain white space.
	holdLiterals []string
}

// NewRedactor checks cfg and builds its Redactor.
func NewRedactor(cfg RedactorConfig) (*Redactor, error) {
	r := &Redactor{noPII: cfg.DisablePII}
	for _, k := range cfg.SecretKeys {
		if r.keys == nil {
			r.keys = make(map[string]bool, len(cfg.SecretKeys))
		}
		r.keys[strings.ToLower(k)] = true
	}
	seen := make(map[string]bool, len(cfg.SecretValues))
	for _, v := range cfg.SecretValues {
		if utf8.RuneCountInString(v) < minSecretRunes || seen[v] {
			continue
		}
		seen[v] = true
		r.literals = append(r.literals, v)
	}
	home, err := cleanHome(cfg.Home)
	if err != nil {
		return nil, err
	}
	r.home = home
	r.holdLiterals = r.literals
	if home != "" {
		r.holdLiterals = append(slices.Clip(r.literals), home)
	}
	return r, nil
}

var windowsAbs = regexp.MustCompile(`^[A-Za-z]:[\\/]`)

func cleanHome(home string) (string, error) {
	if home == "" {
		return "", nil
	}
	if !strings.HasPrefix(home, "/") && !strings.HasPrefix(home, `\\`) && !windowsAbs.MatchString(home) {
		return "", fmt.Errorf("home %q: must be an absolute path", home)
	}
	trimmed := strings.TrimRight(home, `/\`)
	if len(trimmed) < 2 || (len(trimmed) == 2 && trimmed[1] == ':') {
		// A root home hides nothing and would turn every path into "~".
		return "", nil
	}
	return trimmed, nil
}

// span is a byte range [start, end) of a text to replace.
type span struct{ start, end int }

// Text returns s with the §9.4 pipeline applied.
func (r *Redactor) Text(s string) string {
	out, _ := r.text(s)
	return out
}

// text also reports whether a secret ran to the very end of s, which a
// stream forced to release its held text needs to know.
func (r *Redactor) text(s string) (string, bool) {
	secrets := r.secretSpans(s, nil, false)
	secretAtEnd := len(secrets) > 0 && secrets[len(secrets)-1].end == len(s)
	out := replaceSpans(s, secrets, SecretMarker)
	out = replaceSpans(out, r.homeSpans(out, nil), homeMarker)
	if !r.noPII {
		out = replaceSpans(out, piiSpans(out, nil), PIIMarker)
	}
	return out, secretAtEnd
}

// Value applies the pipeline to a decoded JSON value: strings are redacted,
// objects and arrays walked, anything else left alone. The value of a
// credential-named key (password, api_key, authorization, ...) is replaced
// whole unless it is null, a boolean or a token count; so is any value of
// an operator-named secret key. Keys are never
// altered, and v is never modified.
func (r *Redactor) Value(v any) any {
	switch t := v.(type) {
	case string:
		return r.Text(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if r.keys[strings.ToLower(k)] || hidesSecret(k, x) {
				out[k] = SecretMarker
				continue
			}
			out[k] = r.Value(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = r.Value(x)
		}
		return out
	default:
		return v
	}
}

// hidesSecret reports whether the value under key is replaced whole: any
// value of a credential-named key that can carry one, but not the token
// counts and usage that share the word "token".
func hidesSecret(key string, v any) bool {
	named := credentialKey.MatchString(key)
	if !named && (!tokenKey.MatchString(key) || tokenAccountingKey.MatchString(key)) {
		return false
	}
	switch v.(type) {
	case nil, bool:
		return false
	case json.Number, float64, float32, int, int64, int32, uint, uint64, uint32:
		return named
	default:
		return true
	}
}

// secretSpans appends the rule (a) and (b) matches of s to dst, sorted and
// merged: the secrets themselves, or with whole the entire matches.
func (r *Redactor) secretSpans(s string, dst []span, whole bool) []span {
	for i := range secretPatterns {
		dst = secretPatterns[i].appendMatches(s, dst, whole)
	}
	for _, lit := range r.literals {
		dst = appendLiteral(dst, s, lit, nil)
	}
	return mergeSpans(dst)
}

// homeSpans appends the rule (c) matches of s to dst, sorted and merged.
func (r *Redactor) homeSpans(s string, dst []span) []span {
	if r.home != "" {
		dst = appendLiteral(dst, s, r.home, func(end int) bool {
			return end == len(s) || !isNameByte(s[end])
		})
	}
	for i := range homePatterns {
		dst = homePatterns[i].appendMatches(s, dst, true)
	}
	dst = appendWindowsHomes(s, dst)
	return mergeSpans(dst)
}

// piiSpans appends the rule (d) matches of s to dst, sorted and merged.
func piiSpans(s string, dst []span) []span {
	dst = appendEmails(s, dst)
	dst = appendPhones(s, dst)
	return mergeSpans(dst)
}

// matchSpans is every match of the pipeline's patterns in s, context
// included (the key of a key=value secret, a Bearer scheme): a stream must
// not release text through the middle of one.
func (r *Redactor) matchSpans(s string) []span {
	spans := r.secretSpans(s, nil, true)
	spans = r.homeSpans(s, spans)
	if !r.noPII {
		spans = piiSpans(s, spans)
	}
	return spans
}

// appendLiteral appends every occurrence of lit in s whose end passes
// bounded (nil accepts all).
func appendLiteral(dst []span, s, lit string, bounded func(end int) bool) []span {
	for from := 0; ; {
		i := strings.Index(s[from:], lit)
		if i < 0 {
			return dst
		}
		start := from + i
		end := start + len(lit)
		if bounded == nil || bounded(end) {
			dst = append(dst, span{start, end})
		}
		from = start + 1
	}
}

// mergeSpans sorts spans and merges the overlapping ones in place.
func mergeSpans(spans []span) []span {
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
	})
	out := spans[:1]
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp.start < last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// replaceSpans writes s with each span replaced by with; spans must be
// sorted and disjoint.
func replaceSpans(s string, spans []span, with string) string {
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	prev := 0
	for _, sp := range spans {
		b.WriteString(s[prev:sp.start])
		b.WriteString(with)
		prev = sp.end
	}
	b.WriteString(s[prev:])
	return b.String()
}
