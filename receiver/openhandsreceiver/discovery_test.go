package openhandsreceiver

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// injectSearchItems makes a hostile server's first search page: the
// stub's items plus extra, passed to the stub under prefix.
func injectSearchItems(t *testing.T, stub *oh.Server, prefix string, extra ...string) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != prefix+"/api/conversations/search" || r.URL.Query().Get("page_id") != "" {
			return false
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, stub.URL()+"/api/conversations/search?"+r.URL.RawQuery, http.NoBody)
		if !assert.NoError(t, err) {
			return false
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false // the test is ending
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var page struct {
			Items      []json.RawMessage `json:"items"`
			NextPageID *string           `json:"next_page_id"`
		}
		require.NoError(t, json.Unmarshal(body, &page))
		for _, item := range extra {
			page.Items = append(page.Items, json.RawMessage(item))
		}
		out, err := json.Marshal(page)
		require.NoError(t, err)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		return true
	}
}

// TestBadSearchItemsAreSkipped: items that are not ConversationInfo, or
// whose id is not of the server's form, are skipped (logged, counted) and
// the rest of the page is observed; a known conversation whose item turns
// bad keeps its session.
func TestBadSearchItemsAreSkipped(t *testing.T) {
	stub := startStub(t)
	good, known := createConversation(t, stub), createConversation(t, stub)
	hostile := injectSearchItems(t, stub, "",
		`{"id":"`+oh.NewUUID()+`","execution_status":"idle","updated_at":1733000000}`,
		`{"id":"`+known.ID()+`","execution_status":"idle","updated_at":1733000000}`,
		`{"id":42}`,
		`"not an object"`,
		`{"execution_status":"running"}`,
		`{"id":"../../../x/sockets/session/victim","execution_status":"idle"}`)
	var bad atomic.Bool
	front, _ := startFront(t, stub, "", func(w http.ResponseWriter, r *http.Request) bool { return bad.Load() && hostile(w, r) })
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].Endpoint = front.URL
	core, logs := observer.New(zapcore.WarnLevel)
	h := startHarnessLogging(t, cfg, nil, zap.New(core))
	h.waitLive(good, 1)
	h.waitLive(known, 1)

	// From now on known's item is bad, among others: four malformed, two
	// without an id of the server's form.
	bad.Store(true)
	skipped := func(reason string) int64 { return h.metric("otelcol_openhands_search_items_skipped", "reason", reason) }
	require.Eventually(t, func() bool { return skipped(skipMalformed) >= 3*4 && skipped(skipID) >= 3*2 }, waitFor, tick)
	mustStatus(t, good, oh.StatusRunning)
	mustStatus(t, known, oh.StatusRunning)
	h.waitTypes(good.ID(), "run.started", "state.delta")
	h.waitTypes(known.ID(), "run.started", "state.delta")
	assert.Zero(t, count(h.session(known.ID()), "session.ended"), "a bad item is no proof the conversation is gone")
	assert.Equal(t, componentstatus.StatusOK, h.host.last())
	assert.Equal(t, int64(2), h.metric("otelcol_openhands_conversations_attached", "", ""))
	warnings := logs.FilterMessageSnippet("skipped a conversation search item").All()
	assert.Len(t, warnings, 2, "rate-limited: once per reason")
	h.validate()
}

// TestConversationIDCannotSteerTheSocket: behind a gateway that serves
// tenant a under /tenant-a, a listed id that is a path never sends a
// request, let alone the auth frame, outside /tenant-a/.
func TestConversationIDCannotSteerTheSocket(t *testing.T) {
	const prefix = "/tenant-a"
	stub := startStub(t)
	good := createConversation(t, stub)
	front, seen := startFront(t, stub, prefix, injectSearchItems(t, stub, prefix,
		`{"id":"../../../tenant-b/sockets/session/victim","execution_status":"running","updated_at":"2030-01-01T00:00:00Z"}`,
		`{"id":"..%2F..%2Ftenant-b%2Fsockets%2Fsession%2Fvictim","execution_status":"running","updated_at":"2030-01-01T00:00:00Z"}`))
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].Endpoint = front.URL + prefix
	h := startHarness(t, cfg)
	h.waitLive(good, 1)
	require.Eventually(t, func() bool { return seen.count(http.MethodGet, prefix+"/api/conversations/search") >= 3 }, waitFor, tick)

	seen.mu.Lock()
	for _, r := range seen.requests {
		assert.True(t, strings.HasPrefix(r.URL.Path, prefix+"/"), "%s %s left the tenant", r.Method, r.URL.Path)
	}
	seen.mu.Unlock()
	assert.Positive(t, h.metric("otelcol_openhands_search_items_skipped", "reason", skipID))
}

// TestSearchStopsAtTheCap: search asks for the most recently updated
// first and stops paging once max_conversations hold or want a socket: a
// server with many conversations costs one page a round, and the most
// recently updated attach.
func TestSearchStopsAtTheCap(t *testing.T) {
	stub := startStub(t)
	var convs []*oh.Conversation
	for range 250 {
		convs = append(convs, createConversation(t, stub))
	}
	recent := []*oh.Conversation{convs[3], convs[150], convs[7]}
	for _, c := range recent {
		mustAppend(t, c, oh.MessageEvent("user", "updated last"))
	}
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].MaxConversations = len(recent)
	h := startHarness(t, cfg)
	for _, c := range recent {
		h.waitLive(c, 1)
	}
	var searches []oh.Request
	rounds := func() (n int) {
		searches = slices.DeleteFunc(stub.Requests(), func(r oh.Request) bool { return r.Path != "/api/conversations/search" })
		for _, r := range searches {
			if !strings.Contains(r.RawQuery, "page_id=") {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return rounds() >= 3 }, waitFor, tick)
	n := rounds()
	assert.Len(t, searches, n, "one page a round")
	assert.Contains(t, searches[0].RawQuery, "sort_order=UPDATED_AT_DESC")
	attached := 0
	for _, c := range convs {
		attached += c.Sockets()
	}
	assert.Equal(t, len(recent), attached)
	assert.Equal(t, int64(100-len(recent)), h.metric("otelcol_openhands_conversations_overflow", "", ""),
		"the first page's others wait")
}

// TestTruncatedListingEndsNothing: conversations past the listing's cut
// are not ended for being unlisted; one deleted past the cut is, once the
// server says it is gone.
func TestTruncatedListingEndsNothing(t *testing.T) {
	stub := startStub(t)
	a, b := createConversation(t, stub), createConversation(t, stub)
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].MaxConversations = 2
	h := startHarness(t, cfg)
	h.waitLive(a, 1)
	h.waitLive(b, 1)

	// 150 newer conversations fill the first page: a and b are past the cut.
	for range 150 {
		createConversation(t, stub)
	}
	overflow := func() int64 { return h.metric("otelcol_openhands_conversations_overflow", "", "") }
	require.Eventually(t, func() bool { return overflow() == 100 }, waitFor, tick)
	lookups := func(c *oh.Conversation) int {
		n := 0
		for _, r := range stub.Requests() {
			if r.Method == http.MethodGet && r.Path == "/api/conversations/"+c.ID() {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return lookups(a) >= 3 && lookups(b) >= 3 }, waitFor, tick,
		"unlisted known conversations are looked up by id")
	assert.Zero(t, count(h.session(a.ID()), "session.ended"))
	assert.Zero(t, count(h.session(b.ID()), "session.ended"))
	assert.Equal(t, 1, a.Sockets())
	mustStatus(t, b, oh.StatusRunning)
	h.waitTypes(b.ID(), "run.started", "state.delta")

	require.NoError(t, a.Delete())
	got := h.waitTypes(a.ID(), "session.ended")
	assert.Equal(t, "killed", last(got, "session.ended").Data["reason"])
	time.Sleep(5 * cfg.PollInterval)
	assert.Zero(t, count(h.session(b.ID()), "session.ended"))
	h.validate()
}

// TestFailedRoundEndsNothing: a search page that is not JSON fails the
// round: the conversations its earlier pages showed are observed, but no
// known conversation is looked up or ended for being unlisted.
func TestFailedRoundEndsNothing(t *testing.T) {
	stub := startStub(t)
	known := createConversation(t, stub)
	var broken atomic.Bool
	front, _ := startFront(t, stub, "", func(w http.ResponseWriter, r *http.Request) bool {
		if !broken.Load() || r.URL.Path != "/api/conversations/search" || r.URL.Query().Get("page_id") == "" {
			return false
		}
		_, _ = w.Write([]byte(`{"items": [<<garbage>>`))
		return true
	})
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].Endpoint = front.URL
	h := startHarness(t, cfg)
	h.waitLive(known, 1)

	// known is now on the second page, which is garbage.
	broken.Store(true)
	var newer []*oh.Conversation
	for range 100 {
		newer = append(newer, createConversation(t, stub))
	}
	for _, c := range newer {
		waitSockets(t, c, 1)
	}
	require.Eventually(t, func() bool { return h.host.last() == componentstatus.StatusRecoverableError }, waitFor, tick)
	time.Sleep(5 * cfg.PollInterval)
	for _, r := range stub.Requests() {
		assert.NotEqual(t, "/api/conversations/"+known.ID(), r.Path, "looked up after a failed round")
	}
	assert.Zero(t, count(h.session(known.ID()), "session.ended"))
	assert.Equal(t, 1, known.Sockets())
}
