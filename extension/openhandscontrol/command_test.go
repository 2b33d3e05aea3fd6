package openhandscontrol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestParseCommand(t *testing.T) {
	respond := func(subject string, answer any) *aep.Event {
		return &aep.Event{ID: "c1", Type: typeRespond, Session: "s1", Subject: subject, Data: map[string]any{"answer": answer}}
	}
	input := func(data map[string]any) *aep.Event {
		return &aep.Event{ID: "c1", Type: typeSendInput, Session: "s1", Data: data}
	}
	for _, tc := range []struct {
		name       string
		ev         *aep.Event
		wantWrite  write
		wantDetail string // "" = valid
	}{
		{name: "approve", ev: respond("req", map[string]any{"option": "approve", "text": "ok"}),
			wantWrite: write{"/api/conversations/s1/events/respond_to_confirmation", []byte(`{"accept":true}`)}},
		{name: "deny with text", ev: respond("req", map[string]any{"option": "deny", "text": "no"}),
			wantWrite: write{"/api/conversations/s1/events/respond_to_confirmation", []byte(`{"accept":false,"reason":"no"}`)}},
		{name: "deny without text takes the vendor default", ev: respond("req", map[string]any{"option": "deny"}),
			wantWrite: write{"/api/conversations/s1/events/respond_to_confirmation", []byte(`{"accept":false,"reason":"User rejected the action."}`)}},
		{name: "text naming an option", ev: respond("req", map[string]any{"text": " APPROVE "}),
			wantWrite: write{"/api/conversations/s1/events/respond_to_confirmation", []byte(`{"accept":true}`)}},
		{name: "unmatched text denies with it", ev: respond("req", map[string]any{"text": "yes please"}),
			wantWrite: write{"/api/conversations/s1/events/respond_to_confirmation", []byte(`{"accept":false,"reason":"yes please"}`)}},
		{name: "respond without subject", ev: respond("", map[string]any{"option": "approve"}), wantDetail: "needs subject"},
		{name: "respond without answer", ev: &aep.Event{ID: "c1", Type: typeRespond, Session: "s1", Subject: "req"}, wantDetail: "needs data.answer"},
		{name: "answer not an object", ev: respond("req", "approve"), wantDetail: "needs data.answer"},
		{name: "unknown option", ev: respond("req", map[string]any{"option": "maybe"}), wantDetail: `must be "approve" or "deny"`},
		{name: "option not a string", ev: respond("req", map[string]any{"option": true}), wantDetail: `must be "approve" or "deny"`},
		{name: "text not a string", ev: respond("req", map[string]any{"text": 3}), wantDetail: "text must be a string"},
		{name: "empty answer", ev: respond("req", map[string]any{"text": " "}), wantDetail: "needs option"},
		{name: "pause", ev: &aep.Event{ID: "c1", Type: typePause, Session: "s1"}, wantWrite: write{path: "/api/conversations/s1/pause"}},
		{name: "resume", ev: &aep.Event{ID: "c1", Type: typeResume, Session: "s1"}, wantWrite: write{path: "/api/conversations/s1/run"}},
		{name: "interrupt", ev: &aep.Event{ID: "c1", Type: typeInterrupt, Session: "s1"}, wantWrite: write{path: "/api/conversations/s1/interrupt"}},
		{name: "no session", ev: &aep.Event{ID: "c1", Type: typePause}, wantDetail: "names no session"},
		{name: "send input", ev: input(map[string]any{"text": "hi"}), wantWrite: write{"/api/conversations/s1/events",
			[]byte(`{"content":[{"text":"hi","type":"text"}],"role":"user","run":false}`)}},
		{name: "send input at the cap", ev: input(map[string]any{"text": strings.Repeat("ü", 10)}), wantWrite: write{"/api/conversations/s1/events",
			[]byte(`{"content":[{"text":"` + strings.Repeat("ü", 10) + `","type":"text"}],"role":"user","run":false}`)}},
		{name: "send input over the cap", ev: input(map[string]any{"text": strings.Repeat("ü", 11)}), wantDetail: "11 characters, more than send_input_max_chars (10)"},
		{name: "send input without text", ev: input(nil), wantDetail: "needs data.text"},
		{name: "send input with run", ev: input(map[string]any{"text": "hi", "run": false}), wantDetail: "data.run is not accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, rej := parseCommand(nil, tc.ev, 10)
			if tc.wantDetail != "" {
				require.NotNil(t, rej)
				assert.Equal(t, reasonInvalid, rej.reason)
				assert.Contains(t, rej.detail, tc.wantDetail)
				return
			}
			require.Nil(t, rej)
			got := writes[c.typ](c)
			assert.Equal(t, tc.wantWrite.path, got.path)
			assert.Equal(t, string(tc.wantWrite.body), string(got.body))
		})
	}
}

func TestTheSendInputTextNeverEntersADetail(t *testing.T) {
	secret := strings.Repeat("hunter2 ", 3)
	_, rej := parseCommand(nil, &aep.Event{ID: "c1", Type: typeSendInput, Session: "s1", Data: map[string]any{"text": secret}}, 5)
	require.NotNil(t, rej)
	assert.NotContains(t, rej.detail, "hunter2")
}

func TestEveryAcceptedTypeHasAWrite(t *testing.T) {
	assert.Len(t, writes, len(accepted))
	for _, typ := range accepted {
		assert.Contains(t, writes, typ)
	}
	assert.NotContains(t, writes, "control.cancel", "no OpenHands write terminates a run")
}

func TestOperatorTextIsCheckedInEveryField(t *testing.T) {
	deny := func(text string) *aep.Event {
		return &aep.Event{ID: "c1", Type: typeRespond, Session: "s1", Subject: "req",
			Data: map[string]any{"answer": map[string]any{"option": "deny", "text": text}}}
	}
	input := func(text string) *aep.Event {
		return &aep.Event{ID: "c1", Type: typeSendInput, Session: "s1", Data: map[string]any{"text": text}}
	}
	for _, tc := range []struct {
		name       string
		ev         *aep.Event
		wantDetail string // "" = valid
	}{
		{"deny text at the cap", deny(strings.Repeat("ü", 10)), ""},
		{"deny text over the cap", deny(strings.Repeat("ü", 11)), "data.answer.text has 11 characters, more than send_input_max_chars (10)"},
		{"tab, newline and carriage return", input("a\tb\r\nc"), ""},
		{"right-to-left text without overrides", input("שלום"), ""},
		{"NUL", input("rm\x00x"), "data.text contains the control character U+0000 at character 3"},
		{"an escape sequence", input("\x1b[2Jok"), "data.text contains the control character U+001B at character 1"},
		{"DEL", input("a\x7f"), "control character U+007F"},
		{"a C1 control (8-bit CSI)", input("a\u009b2J"), "control character U+009B"},
		{"a bidi override", input("safe\u202etxt"), "data.text contains the bidi control U+202E at character 5"},
		{"a bidi embedding", input("\u202aabc"), "bidi control U+202A"},
		{"a bidi isolate", input("ab\u2066c\u2069"), "bidi control U+2066"},
		{"a deny reason with an escape sequence", deny("no\x1b]0;x\x07"), "data.answer.text contains the control character U+001B at character 3"},
		{"a deny reason with a bidi isolate", deny("no\u2069"), "data.answer.text contains the bidi control U+2069"},
		{"an option named with an override", &aep.Event{ID: "c1", Type: typeRespond, Session: "s1", Subject: "req",
			Data: map[string]any{"answer": map[string]any{"text": "\u202eapprove"}}}, "bidi control U+202E"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rej := parseCommand(nil, tc.ev, 10)
			assertInvalid(t, rej, tc.wantDetail)
		})
	}
}

// TestInvalidTextIsRefusedBeforeDecodingHidesIt feeds frames as the relay
// forwards them: decoding turns both into U+FFFD, only the frame shows
// them.
func TestInvalidTextIsRefusedBeforeDecodingHidesIt(t *testing.T) {
	frame := func(text string) []byte {
		return []byte(`{"aep":"0.1","id":"c1","type":"x.openhands.control.send_input","time":"2026-07-12T08:16:00Z",` +
			`"source":"aep://ops","agent":"ops","session":"s1","capture":"redacted","data":{"text":"` + text + `"}}`)
	}
	for _, tc := range []struct {
		name, text, wantDetail string
	}{
		{"invalid UTF-8", "secret\xff", "the command is not valid UTF-8"},
		{"an encoded surrogate", "secret\xed\xa0\x80", "the command is not valid UTF-8"},
		{"a lone high surrogate", `secret\ud83d`, `the command escapes a lone UTF-16 surrogate (\uD83D)`},
		{"a lone low surrogate", `secret\udE00x`, `lone UTF-16 surrogate (\uDE00)`},
		{"a high surrogate before another escape", `secret\ud83d\n`, `lone UTF-16 surrogate (\uD83D)`},
		{"a surrogate pair", `secret\ud83d\ude00`, ""},
		{"an escaped backslash before u", `secret\\ud83d`, ""},
		{"U+FFFD itself is text", "secret\ufffd", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := frame(tc.text)
			ev, err := aep.Parse(raw)
			require.NoError(t, err, "the frame decodes")
			_, rej := parseCommand(raw, ev, 100)
			assertInvalid(t, rej, tc.wantDetail)
			if rej != nil {
				assert.NotContains(t, rej.detail, "secret")
			}
		})
	}
}

// assertInvalid checks a parse: valid when wantDetail is "", else
// rejected invalid with a detail containing it.
func assertInvalid(t *testing.T, rej *rejection, wantDetail string) {
	t.Helper()
	if wantDetail == "" {
		assert.Nil(t, rej)
		return
	}
	require.NotNil(t, rej)
	assert.Equal(t, reasonInvalid, rej.reason)
	assert.Contains(t, rej.detail, wantDetail)
}
