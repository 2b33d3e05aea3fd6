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
