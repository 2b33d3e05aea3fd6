package openhandsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestScanEventHead(t *testing.T) {
	event := `{"kind":"MessageEvent","id":"e1","timestamp":"2026-08-22T14:03:11.402137","llm_message":{"content":[{"text":"` // cut off
	for _, tc := range []struct {
		name, data          string
		inPage              bool
		id, kind, timestamp string
	}{
		{"event cut short", event, false, "e1", "MessageEvent", "2026-08-22T14:03:11.402137"},
		{"page cut short", `{"items":[` + event, true, "e1", "MessageEvent", "2026-08-22T14:03:11.402137"},
		{"page key first", `{"next_page_id":null,"items":[{"id":"e2","nested":{"a":[1,{"b":2}]},"kind":"X"}]}`, true, "e2", "X", ""},
		{"id after the cut", `{"kind":"MessageEvent","llm_message":"` + "xxxx", false, "", "MessageEvent", ""},
		{"not an event", `[1,2]`, false, "", "", ""},
		{"empty page", `{"items":[]}`, true, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, kind, ts := scanEventHead([]byte(tc.data), tc.inPage)
			assert.Equal(t, []string{tc.id, tc.kind, tc.timestamp}, []string{id, kind, ts})
		})
	}
}
