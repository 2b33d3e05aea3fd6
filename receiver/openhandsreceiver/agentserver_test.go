package openhandsreceiver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestConversationListingThatMovesIsNoLoop: a listing whose anchors jump
// to the front while it is paged (the server then pages on from the
// front, naming anchors again) is followed to its end; a server that
// serves the same page forever is refused after a few pages.
func TestConversationListingThatMovesIsNoLoop(t *testing.T) {
	id := func(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }
	page := func(next string, ids ...int) string {
		items := make([]string, len(ids))
		for i, n := range ids {
			items[i] = `{"id":"` + id(n) + `"}`
		}
		nextPage := "null"
		if next != "" {
			nextPage = `"` + next + `"`
		}
		return `{"items":[` + strings.Join(items, ",") + `],"next_page_id":` + nextPage + `}`
	}
	for _, tc := range []struct {
		name    string
		pages   map[string][]string // by page_id, served in turn, the last one again
		listed  int
		wantErr bool
	}{
		{"anchors jump to the front", map[string][]string{
			"":  {page("c", 1, 2)},
			"c": {page("b", 3, 1), page("", 3, 4)}, // c was updated: from the front; later, past it
			"b": {page("a", 2, 3)},                 // so was b
			"a": {page("c", 1, 2)},                 // and a: nothing new, c named again
		}, 4, false},
		{"the same page forever", map[string][]string{"": {page("x", 1, 2)}, "x": {page("x", 1, 2)}}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests++
				p := r.URL.Query().Get("page_id")
				served := tc.pages[p]
				_, _ = w.Write([]byte(served[0]))
				if len(served) > 1 {
					tc.pages[p] = served[1:]
				}
			}))
			defer srv.Close()
			base, err := url.Parse(srv.URL)
			require.NoError(t, err)
			client := &serverClient{base: base, client: srv.Client()}
			listed := map[string]bool{}
			_, err = client.searchConversations(context.Background(), byUpdate, firstPage, func(items []searchItem) bool {
				for _, it := range items {
					listed[it.info.ID] = true
				}
				return true
			})
			assert.Len(t, listed, tc.listed)
			if tc.wantErr {
				assert.ErrorContains(t, err, "paging loops")
				assert.LessOrEqual(t, requests, 2+staleListingPages)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}
