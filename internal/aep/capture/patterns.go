package capture

import (
	"regexp"
	"strings"
)

// pattern is one redaction pattern, searched so that Go's regexp can use
// its fast paths: it skips ahead to a literal prefix only when the pattern
// starts with one, and has no fast case-insensitive search at all.
type pattern struct {
	re *regexp.Regexp
	// groups lists the submatches holding the secret itself (the first
	// that matched wins); with none the whole match is.
	groups []int
	// wordStart requires the match not to continue a word, as RE2's \b
	// would, but checked by hand so that re keeps its literal prefix.
	wordStart bool
	// byFirst, when set, holds the keywords where a match can start
	// (lower case), by their first byte in either case; re is then
	// anchored with ^ and tried wherever one starts, case-insensitively.
	byFirst *[256][]string
}

// keywordPattern builds a pattern tried only where one of keywords starts.
func keywordPattern(expr string, groups []int, wordStart bool, keywords ...string) pattern {
	var byFirst [256][]string
	for _, kw := range keywords {
		kw = strings.ToLower(kw)
		byFirst[kw[0]] = append(byFirst[kw[0]], kw)
		if isLetter(kw[0]) {
			byFirst[kw[0]-'a'+'A'] = byFirst[kw[0]]
		}
	}
	return pattern{
		re:        regexp.MustCompile(`^(?i)` + expr),
		groups:    groups,
		wordStart: wordStart,
		byFirst:   &byFirst,
	}
}

// keywordWindow is how much text after a keyword a match is first tried
// on; only a match that fills it is retried on the whole rest, which keeps
// regexp's per-call cost proportional to the match, not to the text.
const keywordWindow = 256

// appendMatches appends the secret part of every non-overlapping match in
// s to dst, or with whole the entire match (the secret and the context
// that makes it one).
func (p *pattern) appendMatches(s string, dst []span, whole bool) []span {
	if p.byFirst == nil {
		find := p.re.FindAllStringSubmatchIndex
		if p.groups == nil || whole {
			find = p.re.FindAllStringIndex
		}
		for _, m := range find(s, -1) {
			if p.wordStart && continuesWord(s, m[0]) {
				continue
			}
			dst = p.appendSecret(dst, m, 0, whole)
		}
		return dst
	}
	for i := 0; i < len(s); {
		k := p.nextKeyword(s, i)
		if k < 0 {
			break
		}
		m := findAnchored(p.re, s[k:])
		if m == nil {
			i = k + 1
			continue
		}
		dst = p.appendSecret(dst, m, k, whole)
		i = k + max(m[1], 1)
	}
	return dst
}

// findAnchored runs an anchored regexp on a bounded prefix of s first.
func findAnchored(re *regexp.Regexp, s string) []int {
	if len(s) > keywordWindow {
		m := re.FindStringSubmatchIndex(s[:keywordWindow])
		if m == nil || m[1] < keywordWindow {
			return m
		}
	}
	return re.FindStringSubmatchIndex(s)
}

// tailStart returns where the leftmost match of an end-anchored keyword
// pattern starts in s, or -1.
func (p *pattern) tailStart(s string) int {
	for i := 0; i < len(s); {
		k := p.nextKeyword(s, i)
		if k < 0 {
			return -1
		}
		if p.re.MatchString(s[k:]) {
			return k
		}
		i = k + 1
	}
	return -1
}

func (p *pattern) appendSecret(dst []span, m []int, offset int, whole bool) []span {
	start, end := m[0], m[1]
	if !whole {
		for _, g := range p.groups {
			if m[2*g] >= 0 {
				start, end = m[2*g], m[2*g+1]
				break
			}
		}
	}
	if end > start {
		dst = append(dst, span{offset + start, offset + end})
	}
	return dst
}

// nextKeyword returns the first position at or after from where a keyword
// starts (and, with wordStart, does not continue a word), or -1.
func (p *pattern) nextKeyword(s string, from int) int {
	for i := from; i < len(s); i++ {
		candidates := p.byFirst[s[i]]
		if candidates == nil || p.wordStart && continuesWord(s, i) {
			continue
		}
		for _, kw := range candidates {
			if hasPrefixFold(s[i:], kw) {
				return i
			}
		}
	}
	return -1
}

// hasPrefixFold reports whether s starts with lower, ignoring ASCII case.
func hasPrefixFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func continuesWord(s string, i int) bool { return i > 0 && isWordByte(s[i-1]) }

func isWordByte(b byte) bool {
	return isLetter(b) || isDigit(b) || b == '_'
}

// credentialNames are the key names whose assigned values are secrets
// (AEP-0003 §9.4a plus authorization, as the corpus pins).
const credentialNames = `(?:password|passwd|secret|api[_-]?key|token|authorization)`

var credentialKeywords = []string{"password", "passwd", "secret", "api_key", "api-key", "apikey", "token", "authorization"}

// pemBegin opens a PEM block; pemEnd closes it. An unterminated block is
// redacted to the end of the text.
const pemBegin = "-----BEGIN"

var pemEnd = regexp.MustCompile(`-----END[^\n]*?-----`)

// secretPatterns are rule (a): the §9.4 floor and the vendor token shapes
// the corpus adds.
var secretPatterns = []pattern{
	{re: regexp.MustCompile(pemBegin + `(?:[\s\S]*?-----END[^\n]*?-----|[\s\S]*)`)},
	{re: regexp.MustCompile(`AKIA[0-9A-Z]{16,}`), wordStart: true},
	{re: regexp.MustCompile(`ASIA[0-9A-Z]{16,}`), wordStart: true},
	// A Bearer scheme keeps its name; the token (RFC 6750 b64token, 8+
	// characters, so "the bearer of good news" stays) is the secret.
	keywordPattern(`bearer\s+([A-Za-z0-9._~+/-]{8,}=*)`, []int{1}, true, "bearer"),
	// key=value, key: value and "key": "value": a quoted value runs to its
	// closing quote (or the end of the line), a bare one to white space,
	// and an authorization scheme goes with its credentials.
	keywordPattern(credentialNames+`['"]?\s*[=:]\s*`+
		`(?:"((?:[^"\\\r\n]|\\.)*)"?|'([^'\r\n]*)'?|((?:(?:bearer|basic)\s+)?\S+))`,
		[]int{1, 2, 3}, false, credentialKeywords...),
	{re: regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), wordStart: true},
	{re: regexp.MustCompile(`gh[pousr]_[A-Za-z0-9]{20,}`), wordStart: true},
	{re: regexp.MustCompile(`github_pat_[A-Za-z0-9_]{20,}`), wordStart: true},
	{re: regexp.MustCompile(`glpat-[A-Za-z0-9_-]{20,}`), wordStart: true},
	{re: regexp.MustCompile(`xox[abeprs]-[A-Za-z0-9-]{10,}`), wordStart: true},
	{re: regexp.MustCompile(`sk-[A-Za-z0-9_-]{20,}`), wordStart: true},
	{re: regexp.MustCompile(`sk_(?:live|test)_[A-Za-z0-9]{10,}`), wordStart: true},
	{re: regexp.MustCompile(`rk_(?:live|test)_[A-Za-z0-9]{10,}`), wordStart: true},
	{re: regexp.MustCompile(`AIza[0-9A-Za-z_-]{35}`), wordStart: true},
}

// Stream tail rules: each matches, at the very end of the pending text, the
// start of a secret whose extent more text could still change.
var (
	credentialTail = keywordPattern(credentialNames+`['"]?\s*`+
		`(?:[=:]\s*(?:"(?:[^"\\\r\n]|\\.)*\\?|'[^'\r\n]*|(?:bearer|basic)\s+\S*|\S*))?$`,
		nil, false, credentialKeywords...)
	bearerTail = keywordPattern(`bearer(?:\s+\S*)?$`, nil, true, "bearer")
	// phoneTailAt is a phone number still being typed, anchored where
	// appendPhones would start one.
	phoneTailAt = regexp.MustCompile(`^\+?\(?\d[\d ().-]*$`)
)

// homePatterns are rule (c) beyond the configured home: any user's home
// directory on Linux and macOS. appendWindowsHomes adds Windows.
var homePatterns = []pattern{
	{re: regexp.MustCompile(`/home/[A-Za-z0-9._$-]+`)},
	{re: regexp.MustCompile(`/Users/[A-Za-z0-9._$-]+`)},
}

// windowsHomeAfterDrive is the rest of C:\Users\<u> after "C:", with
// JSON-escaped backslashes and forward slashes too.
var windowsHomeAfterDrive = regexp.MustCompile(`^(?:\\{1,2}|/)(?i:users)(?:\\{1,2}|/)[A-Za-z0-9._$-]+`)

// appendWindowsHomes appends the Windows user homes in s to dst, found from
// each drive colon.
func appendWindowsHomes(s string, dst []span) []span {
	for from := 0; ; {
		i := strings.IndexByte(s[from:], ':')
		if i < 0 {
			return dst
		}
		colon := from + i
		from = colon + 1
		if colon == 0 || !isLetter(s[colon-1]) || continuesWord(s, colon-1) {
			continue
		}
		if m := windowsHomeAfterDrive.FindStringIndex(s[colon+1:]); m != nil {
			dst = append(dst, span{colon - 1, colon + 1 + m[1]})
			from = colon + 1 + m[1]
		}
	}
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

var (
	// emailAt is an e-mail address anchored at the start of its local
	// part, which the scan finds by walking back from each '@'.
	emailAt = regexp.MustCompile(`^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
	// phoneAt needs separators or a leading +, so that plain numbers,
	// dates and version strings are not taken for phone numbers.
	phoneAt = regexp.MustCompile(`^(?:(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]\d{4}|\+\d{8,15})`)
)

const (
	// minPhoneDigits is the fewest digits phoneAt can match; text with
	// fewer skips the phone scan.
	minPhoneDigits = 8
	// maxPhoneLen is the longest match of phoneAt.
	maxPhoneLen = 21
	// maxEmailDomain bounds the domain of an e-mail address (RFC 1035
	// names are at most 253 octets).
	maxEmailDomain = 256
)

// The object keys whose values are secrets whole (hardening pinned by the
// corpus): credentialKey names a credential by any of its words; tokenKey
// says "token", which names a credential (access_token, authToken, token)
// unless the key is about counting tokens (tokenAccountingKey:
// accumulated_token_usage, token_count, tokenLimit) or the value is a
// number (max_tokens, per_turn_token, gen_ai.usage.input_tokens: a token
// credential is text).
var (
	credentialKey      = regexp.MustCompile(`(?i)password|passwd|secret|api[_-]?key|authorization|credential|private[_-]?key|access[_-]?key`)
	tokenKey           = regexp.MustCompile(`(?i)token`)
	tokenAccountingKey = regexp.MustCompile(`(?i)tokens?[_.-]?(?:usage|count|limit|type)`)
)

// appendEmails appends the e-mail addresses in s to dst.
func appendEmails(s string, dst []span) []span {
	for from := 0; ; {
		at := strings.IndexByte(s[from:], '@')
		if at < 0 {
			return dst
		}
		at += from
		start := at
		for start > from && isEmailLocalByte(s[start-1]) {
			start--
		}
		if m := emailAt.FindStringIndex(s[start:min(len(s), at+maxEmailDomain)]); m != nil {
			dst = append(dst, span{start, start + m[1]})
			from = start + m[1]
			continue
		}
		from = at + 1
	}
}

// appendPhones appends the phone numbers in s to dst: a match starts at a
// '+', '(' or digit that does not continue a word or number, and must not
// run on into one.
func appendPhones(s string, dst []span) []span {
	if countDigits(s) < minPhoneDigits {
		return dst
	}
	for i := 0; i < len(s); i++ {
		if !phoneCanStart(s, i) {
			continue
		}
		candidate := s[i:min(len(s), i+maxPhoneLen)]
		if countDigits(candidate) < minPhoneDigits {
			continue
		}
		m := phoneAt.FindStringIndex(candidate)
		if m == nil || !phoneEnds(s, i+m[1]) {
			continue
		}
		dst = append(dst, span{i, i + m[1]})
		i += m[1] - 1
	}
	return dst
}

// phoneTailStart returns where a phone number that more text could still
// complete starts in s, or -1.
func phoneTailStart(s string) int {
	for i := max(0, len(s)-maxPhoneLen); i < len(s); i++ {
		if phoneCanStart(s, i) && phoneTailAt.MatchString(s[i:]) {
			return i
		}
	}
	return -1
}

func phoneCanStart(s string, i int) bool {
	c := s[i]
	if c != '+' && c != '(' && !isDigit(c) {
		return false
	}
	return i == 0 || !isNameByte(s[i-1]) && s[i-1] != '+'
}

func phoneEnds(s string, end int) bool {
	if end == len(s) {
		return true
	}
	next := s[end]
	if next == '.' || next == '-' {
		return end+1 == len(s) || !isDigit(s[end+1])
	}
	return !isNameByte(next)
}

func isEmailLocalByte(b byte) bool {
	return isNameByte(b) || b == '%' || b == '+'
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			n++
		}
	}
	return n
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// isNameByte reports whether b can continue a file or user name.
func isNameByte(b byte) bool {
	return isLetter(b) || isDigit(b) || b == '.' || b == '_' || b == '-'
}
