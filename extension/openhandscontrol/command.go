package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The five commands the open gate accepts: the AEP-0004 §5 core verbs and
// two vendor verbs under the §5 extension rule. control.cancel is not
// among them: no OpenHands write terminates a run.
const (
	typeRespond   = "control.attention.respond"
	typePause     = "control.pause"
	typeResume    = "control.resume"
	typeSendInput = "x.openhands.control.send_input"
	typeInterrupt = "x.openhands.control.interrupt"
)

// accepted is the gate-on hello's accepts, in declaration order.
var accepted = []string{typeRespond, typePause, typeResume, typeSendInput, typeInterrupt}

// Nack reasons (AEP-0004 registry nack-reasons.json) the gate uses.
const (
	reasonUnsupported = "unsupported"
	reasonBusy        = "busy"
	reasonRefused     = "refused"
	reasonInvalid     = "invalid"
)

// Options of an answerable permission request, and the vendor's own
// default reason for a deny without text.
const (
	optionApprove = "approve"
	optionDeny    = "deny"
	defaultDenial = "User rejected the action."
)

// rejection is a control.rejected decision: a registry reason and a
// detail, redaction-gated when it rides.
type rejection struct {
	reason, detail string
}

func (r *rejection) Error() string { return r.reason + ": " + r.detail }

// command is one accepted-for-execution command: the envelope fields the
// gate needs and its decoded payload.
type command struct {
	id, source, agent, session, typ string
	// respond
	subject string // the attention.requested it answers
	option  string // approve or deny
	text    string // answer.text: the deny reason, echoed redaction-gated
	// send_input
	input  string
	digest string // of input: what a note restored after a restart keeps of it
}

// parseCommand decodes and checks one command for a gate that accepts its
// type; a malformed one is rejected invalid with a detail. raw is the
// frame ev was decoded from: decoding turns invalid UTF-8 into U+FFFD, so
// only the frame still shows it. No operator text ever appears in a
// detail.
func parseCommand(raw []byte, ev *aep.Event, maxChars int) (*command, *rejection) {
	c := &command{id: ev.ID, source: ev.Source, agent: ev.Agent, session: ev.Session, typ: ev.Type}
	if c.session == "" {
		return nil, invalid("the command names no session")
	}
	if rej := checkEncoding(raw); rej != nil {
		return nil, rej
	}
	switch ev.Type {
	case typeRespond:
		return c, c.parseRespond(ev, maxChars)
	case typeSendInput:
		return c, c.parseSendInput(ev.Data, maxChars)
	}
	return c, nil
}

// checkEncoding refuses a frame that is not valid UTF-8 text: invalid
// bytes, or a \u escape of a lone UTF-16 surrogate. Decoding reads both
// as U+FFFD, so an operator's text would otherwise change silently. A
// backslash outside a string is not JSON, so every one in a decoded frame
// starts an escape.
func checkEncoding(raw []byte) *rejection {
	if !utf8.Valid(raw) {
		return invalid("the command is not valid UTF-8")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r := hex4(raw[i+1:])
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r < 0xDC00 && i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
			if utf16.DecodeRune(r, hex4(raw[i+3:])) != utf8.RuneError {
				i += 6 // the pair's low half
				continue
			}
		}
		return invalid("the command escapes a lone UTF-16 surrogate (\\u%04X): its text is not valid Unicode", r)
	}
	return nil
}

// hex4 reads the 4 hex digits of a \u escape; -1 when there are none.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(n)
}

// checkText refuses an operator text over the cap, or carrying a
// character a terminal or an editor would act on rather than show: NUL
// and the other C0 and C1 controls and DEL (tab, newline and carriage
// return excepted), and the bidi embeddings, overrides and isolates
// (U+202A–U+202E, U+2066–U+2069) that reorder what a reviewer reads. The
// detail names the field and the character, never the text.
func checkText(field, text string, maxChars int) *rejection {
	if n := utf8.RuneCountInString(text); n > maxChars {
		return invalid("%s has %d characters, more than send_input_max_chars (%d)", field, n, maxChars)
	}
	for i, r := range []rune(text) {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20 || r >= 0x7F && r <= 0x9F:
			return invalid("%s contains the control character U+%04X at character %d", field, r, i+1)
		case r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069:
			return invalid("%s contains the bidi control U+%04X at character %d", field, r, i+1)
		}
	}
	return nil
}

func invalid(format string, args ...any) *rejection {
	return &rejection{reason: reasonInvalid, detail: fmt.Sprintf(format, args...)}
}

// parseRespond reads answer {option?, text?}. An option must be approve
// or deny. Text alone selects the option it names (AEP-0008: trimmed,
// case-insensitive, id or label); any other text denies with the text as
// the reason, never approves (a permission request's unmatched text must
// not be applied as the permissive choice).
func (c *command) parseRespond(ev *aep.Event, maxChars int) *rejection {
	c.subject = ev.Subject
	if c.subject == "" {
		return invalid("control.attention.respond needs subject: the id of the attention.requested it answers")
	}
	answer, ok := ev.Data["answer"].(map[string]any)
	if !ok {
		return invalid("control.attention.respond needs data.answer, an object")
	}
	option, hasOption := answer["option"]
	text, hasText := answer["text"]
	if hasText {
		if c.text, ok = text.(string); !ok {
			return invalid("data.answer.text must be a string")
		}
		if rej := checkText("data.answer.text", c.text, maxChars); rej != nil {
			return rej
		}
	}
	switch {
	case hasOption:
		s, ok := option.(string)
		if !ok || (s != optionApprove && s != optionDeny) {
			return invalid("data.answer.option must be %q or %q", optionApprove, optionDeny)
		}
		c.option = s
	case hasText && strings.TrimSpace(c.text) != "":
		switch strings.ToLower(strings.TrimSpace(c.text)) {
		case optionApprove:
			c.option, c.text = optionApprove, ""
		case optionDeny:
			c.option, c.text = optionDeny, ""
		default:
			c.option = optionDeny
		}
	default:
		return invalid("data.answer needs option (%q or %q) or text", optionApprove, optionDeny)
	}
	return nil
}

// parseSendInput reads {text}: required, at most maxChars characters. run
// is not a payload field: the gate pins run false, and a command asking
// for a run is refused rather than silently narrowed.
func (c *command) parseSendInput(data map[string]any, maxChars int) *rejection {
	if _, ok := data["run"]; ok {
		return invalid("data.run is not accepted: send_input always appends without starting a run")
	}
	text, ok := data["text"].(string)
	switch {
	case !ok:
		return invalid("x.openhands.control.send_input needs data.text, a string")
	case strings.TrimSpace(text) == "":
		return invalid("data.text is empty")
	}
	if rej := checkText("data.text", text, maxChars); rej != nil {
		return rej
	}
	c.input, c.digest = text, digest(text)
	return nil
}

// digest identifies an operator text without keeping it: the hex SHA-256
// of its UTF-8 bytes.
func digest(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// write is one REST write: the path under the conversation and its JSON
// body (nil for none).
type write struct {
	path string
	body []byte
}

// writes holds the REST write that carries out each accepted type; its
// keys are exactly the types in accepted.
var writes = map[string]func(c *command) write{
	typeRespond: func(c *command) write {
		body := map[string]any{"accept": c.option == optionApprove}
		if c.option == optionDeny {
			body["reason"] = defaultDenial
			if strings.TrimSpace(c.text) != "" {
				body["reason"] = c.text
			}
		}
		return write{path: c.conversationPath() + "/events/respond_to_confirmation", body: encode(body)}
	},
	typePause:     func(c *command) write { return write{path: c.conversationPath() + "/pause"} },
	typeResume:    func(c *command) write { return write{path: c.conversationPath() + "/run"} },
	typeInterrupt: func(c *command) write { return write{path: c.conversationPath() + "/interrupt"} },
	typeSendInput: func(c *command) write {
		return write{path: c.conversationPath() + "/events", body: encode(map[string]any{
			"role":    "user",
			"content": []any{map[string]any{"type": "text", "text": c.input}},
			"run":     false,
		})}
	},
}

func (c *command) conversationPath() string {
	return "/api/conversations/" + url.PathEscape(c.session)
}

// encode marshals a body built of maps, slices, strings and bools, which
// always encodes.
func encode(v any) []byte {
	raw, _ := json.Marshal(v)
	return raw
}
