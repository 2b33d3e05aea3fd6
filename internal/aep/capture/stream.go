package capture

import "bytes"

const (
	// maxHeld caps the text a stream holds back. Past it the held text is
	// released redacted as it stands, and the rest of a secret found
	// running to its end is swallowed.
	maxHeld = 64 << 10
	// tailWindow is how far back the tail rules look for the start of a
	// secret that may still be completing (a key awaiting its value, an
	// open quoted value, a Bearer scheme awaiting its token).
	tailWindow = 4 << 10
	// pemEndLine is how far back an END line split across chunks is
	// looked for.
	pemEndLine = 512
)

type swallowMode int

const (
	swallowNothing swallowMode = iota
	// swallowRun drops text up to the next white space: a secret ran to
	// the end of text released at the cap.
	swallowRun
	// swallowPEM drops text through the END line of a PEM block released
	// at the cap.
	swallowPEM
)

// StreamRedactor redacts one stream of text deltas (token by token) so that
// a secret split across deltas never reaches the output whole: it holds
// back the end of the pending text while that end could still be the start
// of a secret, and releases the rest through the full pipeline. Released
// text always ends at white space (or is what Flush releases), so a word
// is never cut in two.
//
// The concatenated output equals Redactor.Text of the concatenated input.
// Memory is bounded: held text past 64 KiB is released redacted as it
// stands, and the rest of a secret found open at its end is swallowed (a
// PEM block through its END line, anything else through the next white
// space), so only a quoted credential value longer than 64 KiB containing
// white space can reach the output in part.
//
// One StreamRedactor serves one stream and is not safe for concurrent use.
type StreamRedactor struct {
	r   *Redactor
	buf []byte // pending text, not yet released
	// runStart is where the trailing run of non-space bytes begins; it is
	// len(buf) when buf ends in white space.
	runStart int
	// scanned is how much of buf has been searched for PEM markers.
	scanned int
	// pemStart is the offset of an unterminated PEM block, or -1.
	pemStart int
	swallow  swallowMode
}

// Stream starts redacting one stream of deltas.
func (r *Redactor) Stream() *StreamRedactor {
	return &StreamRedactor{r: r, pemStart: -1}
}

// Write adds a delta and returns the redacted text that can be released
// now, possibly "".
func (s *StreamRedactor) Write(chunk string) (safe string) {
	chunk = s.dropSwallowed(chunk)
	if chunk == "" {
		return ""
	}
	old := len(s.buf)
	s.buf = append(s.buf, chunk...)
	if i := lastSpace(chunk); i >= 0 {
		s.runStart = old + i + 1
	}
	s.trackPEM()
	cut := s.releasable()
	if len(s.buf)-cut > maxHeld {
		return s.releaseAll()
	}
	return s.release(cut)
}

// Flush releases everything still held, redacted, and readies the stream
// for new text: call it when the stream's durable event or its end arrives.
func (s *StreamRedactor) Flush() string {
	var out string
	if s.swallow == swallowNothing {
		out = s.r.Text(string(s.buf))
	}
	*s = StreamRedactor{r: s.r, buf: s.buf[:0], pemStart: -1}
	return out
}

// releasable returns how much of buf can be released: everything before
// the earliest place a secret may still be completing, moved back to a
// white-space boundary and out of any secret it would split.
func (s *StreamRedactor) releasable() int {
	cut := s.runStart
	if s.pemStart >= 0 {
		cut = min(cut, s.pemStart)
	}
	if cut == 0 {
		return 0
	}
	window := max(0, len(s.buf)-tailWindow)
	pending := string(s.buf[window:])
	for _, tail := range []*pattern{&credentialTail, &bearerTail} {
		if start := tail.tailStart(pending); start >= 0 {
			cut = min(cut, window+start)
		}
	}
	if !s.r.noPII {
		if start := phoneTailStart(pending); start >= 0 {
			cut = min(cut, window+start)
		}
	}
	cut = min(cut, s.literalHold())
	cut = s.toRunStart(cut)
	if cut == 0 {
		return 0
	}
	// A complete match may straddle the cut (a quoted value with spaces,
	// a literal with spaces, a closed PEM block): move the cut before it,
	// context and all.
	spans := s.r.matchSpans(string(s.buf[:min(len(s.buf), cut+tailWindow)]))
	for i := len(spans) - 1; i >= 0 && cut > 0; i-- {
		if spans[i].start < cut && spans[i].end > cut {
			cut = s.toRunStart(spans[i].start)
		}
	}
	return cut
}

// literalHold returns where the longest suffix of buf that is a proper
// prefix of a configured secret (or home) begins, or len(buf).
func (s *StreamRedactor) literalHold() int {
	hold := len(s.buf)
	for _, lit := range s.r.holdLiterals {
		for n := min(len(lit)-1, len(s.buf)); n > 0; n-- {
			if string(s.buf[len(s.buf)-n:]) == lit[:n] {
				hold = min(hold, len(s.buf)-n)
				break
			}
		}
	}
	return hold
}

// toRunStart moves cut back to the start of the run of non-space bytes it
// falls in, so released text always ends at white space and no pattern
// sees a word cut in two.
func (s *StreamRedactor) toRunStart(cut int) int {
	for cut > 0 && !isSpace(s.buf[cut-1]) {
		cut--
	}
	return cut
}

// trackPEM finds PEM blocks in the newly appended text: an unterminated
// one is held from its BEGIN until its END line arrives.
func (s *StreamRedactor) trackPEM() {
	if s.pemStart >= 0 {
		from := max(s.pemStart+len(pemBegin), s.scanned-pemEndLine)
		loc := pemEnd.FindIndex(s.buf[from:])
		if loc == nil {
			s.scanned = len(s.buf)
			return
		}
		s.pemStart = -1
		s.scanned = from + loc[1]
	}
	for {
		from := max(0, s.scanned-len(pemBegin)+1)
		i := bytes.Index(s.buf[from:], []byte(pemBegin))
		if i < 0 {
			s.scanned = len(s.buf)
			return
		}
		body := from + i + len(pemBegin)
		loc := pemEnd.FindIndex(s.buf[body:])
		if loc == nil {
			s.pemStart = from + i
			s.scanned = len(s.buf)
			return
		}
		s.scanned = body + loc[1]
	}
}

// release redacts and returns buf[:cut], keeping the rest pending.
func (s *StreamRedactor) release(cut int) string {
	if cut == 0 {
		return ""
	}
	out := s.r.Text(string(s.buf[:cut]))
	s.buf = s.buf[:copy(s.buf, s.buf[cut:])]
	s.runStart -= cut
	s.scanned = max(0, s.scanned-cut)
	if s.pemStart >= 0 {
		s.pemStart -= cut
	}
	return out
}

// releaseAll empties a buffer that outgrew the hold cap. Whatever secret
// was still open at its end is redacted as far as it got, and its
// continuation is swallowed; only the start of a configured secret stays
// held, since it cannot be recognised once released.
func (s *StreamRedactor) releaseAll() string {
	if s.pemStart >= 0 {
		out := s.r.Text(string(s.buf))
		s.swallow = swallowPEM
		// Keep the end of the block, where a split END line may begin.
		keep := s.buf[max(s.pemStart+len(pemBegin), len(s.buf)-pemEndLine):]
		s.buf = s.buf[:copy(s.buf, keep)]
		s.runStart, s.scanned, s.pemStart = len(s.buf), len(s.buf), -1
		return out
	}
	cut := s.literalHold()
	if cut == 0 {
		cut = len(s.buf)
	}
	out, secretAtEnd := s.r.text(string(s.buf[:cut]))
	if secretAtEnd && !isSpace(s.buf[cut-1]) {
		s.swallow = swallowRun
	}
	rest := string(s.buf[cut:])
	s.buf, s.runStart, s.scanned = s.buf[:0], 0, 0
	return out + s.Write(rest)
}

// dropSwallowed removes from chunk what continues a secret released at the
// cap, returning the text that follows it.
func (s *StreamRedactor) dropSwallowed(chunk string) string {
	switch s.swallow {
	case swallowRun:
		i := firstSpace(chunk)
		if i < 0 {
			return ""
		}
		s.swallow = swallowNothing
		return chunk[i:]
	case swallowPEM:
		s.buf = append(s.buf, chunk...)
		loc := pemEnd.FindIndex(s.buf)
		if loc == nil {
			keep := s.buf[max(0, len(s.buf)-pemEndLine):]
			s.buf = s.buf[:copy(s.buf, keep)]
			return ""
		}
		rest := string(s.buf[loc[1]:])
		s.buf = s.buf[:0]
		s.runStart, s.scanned = 0, 0
		s.swallow = swallowNothing
		return rest
	default:
		return chunk
	}
}

// isSpace is RE2's \s, so that the hold rules and the patterns agree on
// where a run of non-space text ends.
func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f'
}

func lastSpace(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if isSpace(s[i]) {
			return i
		}
	}
	return -1
}

func firstSpace(s string) int {
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			return i
		}
	}
	return -1
}
