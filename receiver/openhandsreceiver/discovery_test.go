package openhandsreceiver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
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

// requests returns the stub's requests to path, GETs only.
func requests(stub *oh.Server, path string) []oh.Request {
	return slices.DeleteFunc(stub.Requests(), func(r oh.Request) bool { return r.Method != http.MethodGet || r.Path != path })
}

// rounds is how many discovery rounds have completed: each ends with one
// count.
func rounds(stub *oh.Server) int { return len(requests(stub, "/api/conversations/count")) }

// waitRounds waits for n more rounds.
func waitRounds(t *testing.T, stub *oh.Server, n int) {
	t.Helper()
	waitMore(t, stub, rounds, n)
}

// roundsBegun is how many discovery rounds have begun, failed ones
// included: each opens with the first page of the listing by update.
func roundsBegun(stub *oh.Server) int {
	n := 0
	for _, r := range requests(stub, "/api/conversations/search") {
		if q, err := url.ParseQuery(r.RawQuery); err == nil && q.Get("sort_order") == byUpdate && !q.Has("page_id") {
			n++
		}
	}
	return n
}

// waitRoundsEnded waits for n more rounds, failed ones included, to run
// to their end: a server's rounds run one after the other, so n have
// ended once n+1 more have begun. What did not happen by then, n rounds
// did not do.
func waitRoundsEnded(t *testing.T, stub *oh.Server, n int) {
	t.Helper()
	waitMore(t, stub, roundsBegun, n+1)
}

// waitMore waits until counter shows n more than it does now.
func waitMore(t *testing.T, stub *oh.Server, counter func(*oh.Server) int, n int) {
	t.Helper()
	want := counter(stub) + n
	require.Eventually(t, func() bool { return counter(stub) >= want }, waitFor, tick)
}

// TestDiscoveryCostsWhatChanged: the first round lists everything,
// oldest created first, beside the head of the listing by update; after
// it a round costs the server one search page (the head) and one count,
// however many conversations it holds; the most recently updated attach first, and
// the rest wait for a slot.
func TestDiscoveryCostsWhatChanged(t *testing.T) {
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
	waitRounds(t, stub, 3)
	n := rounds(stub)
	var full, head int
	for _, r := range requests(stub, "/api/conversations/search") {
		q, err := url.ParseQuery(r.RawQuery)
		require.NoError(t, err)
		switch q.Get("sort_order") {
		case "CREATED_AT":
			full++
		case "UPDATED_AT_DESC":
			head++
			assert.False(t, q.Has("page_id"), "one page a round once nothing moves")
		}
	}
	assert.Equal(t, 3, full, "the first round lists everything, once")
	assert.InDelta(t, n, head, 1, "one search page a round")
	assert.Empty(t, requests(stub, "/api/conversations"), "nothing is looked up while the count agrees")
	attached := 0
	for _, c := range convs {
		attached += c.Sockets()
	}
	assert.LessOrEqual(t, attached, len(recent))
	assert.Positive(t, h.metric("otelcol_openhands_conversations_overflow", "", ""), "the others wait")
}

// TestNewActivityIsNotStarvedByIdleHistory: with every slot taken by
// idle conversations and hundreds more waiting, a conversation created
// later, and a new event in an idle one, attach within a few rounds: the
// idle ones give their slots up once quiet for a poll interval.
func TestNewActivityIsNotStarvedByIdleHistory(t *testing.T) {
	stub := startStub(t)
	var idle []*oh.Conversation
	for range 300 {
		idle = append(idle, createConversation(t, stub))
	}
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].MaxConversations = 5
	h := startHarness(t, cfg)
	overflow := func() int64 { return h.metric("otelcol_openhands_conversations_overflow", "", "") }
	require.Eventually(t, func() bool { return overflow() > 250 }, waitFor, tick)

	fresh := createConversation(t, stub)
	mustAppend(t, fresh, oh.MessageEvent("user", "new activity"))
	h.waitLive(fresh, 1)
	h.waitTypes(fresh.ID(), "x.openhands.message.event")

	// An idle conversation, already read and released, moves again.
	var released *oh.Conversation
	require.Eventually(t, func() bool {
		for _, c := range idle {
			if count(h.session(c.ID()), "state.snapshot") > 0 && c.Sockets() == 0 {
				released = c
				return true
			}
		}
		return false
	}, waitFor, tick)
	mustAppend(t, released, oh.MessageEvent("user", "back again"))
	h.waitLive(released, 2)
	h.waitTypes(released.ID(), "x.openhands.message.event")
	assert.Positive(t, overflow(), "idle history still waits behind them")
}

// TestUnlistedConversationsEndOnlyWhenGone: conversations the listing's
// head does not show are not ended for it; one deleted is, once the count
// drops and the server answers null for it by id.
func TestUnlistedConversationsEndOnlyWhenGone(t *testing.T) {
	stub := startStub(t)
	a, b := createConversation(t, stub), createConversation(t, stub)
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].MaxConversations = 2
	h := startHarness(t, cfg)
	h.waitLive(a, 1)
	h.waitLive(b, 1)

	// 150 newer conversations fill the head of the listing: a and b are
	// far past it.
	for range 150 {
		createConversation(t, stub)
	}
	require.Eventually(t, func() bool { return h.metric("otelcol_openhands_conversations_overflow", "", "") > 0 }, waitFor, tick)
	mustAppend(t, b, oh.MessageEvent("user", "still here"))
	h.waitTypes(b.ID(), "x.openhands.message.event")
	waitRounds(t, stub, 3)
	assert.Empty(t, requests(stub, "/api/conversations"), "nothing is looked up while the count agrees")
	assert.Zero(t, count(h.session(a.ID()), "session.ended"))
	assert.Zero(t, count(h.session(b.ID()), "session.ended"))

	require.NoError(t, a.Delete())
	got := h.waitTypes(a.ID(), "session.ended")
	assert.Equal(t, "killed", last(got, "session.ended").Data["reason"])
	assert.NotEmpty(t, requests(stub, "/api/conversations"), "the drop in the count had the unlisted looked up")
	waitRounds(t, stub, 5)
	assert.Zero(t, count(h.session(b.ID()), "session.ended"))
	h.validate()
}

// TestFailedRoundEndsNothing: a search page that is not JSON fails the
// round: the conversations its earlier pages showed are observed, but no
// known conversation is looked up or ended for being unlisted.
func TestFailedRoundEndsNothing(t *testing.T) {
	stub := startStub(t)
	known := createConversation(t, stub)
	var broken, held atomic.Bool
	release := make(chan struct{})
	front, _ := startFront(t, stub, "", func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/api/conversations/search" {
			return false
		}
		if held.Load() {
			<-release
		}
		if !broken.Load() || r.URL.Query().Get("page_id") == "" {
			return false
		}
		_, _ = w.Write([]byte(`{"items": [<<garbage>>`))
		return true
	})
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].Endpoint = front.URL
	h := startHarness(t, cfg)
	h.waitLive(known, 1)

	// 100 newer conversations, created while the round waits for its
	// first page, fill it: the round reads on, and the second page is
	// garbage.
	held.Store(true)
	broken.Store(true)
	var newer []*oh.Conversation
	for range 100 {
		newer = append(newer, createConversation(t, stub))
	}
	held.Store(false)
	close(release)
	for _, c := range newer {
		waitSockets(t, c, 1)
	}
	require.Eventually(t, func() bool { return h.host.last() == componentstatus.StatusRecoverableError }, waitFor, tick)
	waitRoundsEnded(t, stub, 5)
	assert.Empty(t, requests(stub, "/api/conversations"), "looked up after a failed round")
	assert.Zero(t, count(h.session(known.ID()), "session.ended"))
	assert.Equal(t, 1, known.Sockets())
}

// TestStatusOnlyChangeIsSeenAtTheRecheck: the server moves no updated_at
// when only a conversation's status changes, so the head of the listing
// does not show it; with the conversation detached and past the head,
// the recheck (every known conversation read by id) does, and it attaches
// again.
func TestStatusOnlyChangeIsSeenAtTheRecheck(t *testing.T) {
	stub := startStub(t)
	c := createConversation(t, stub)
	cfg := fastConfig(socketSession, stub)
	cfg.IdleDetach = 100 * time.Millisecond
	cfg.RecheckInterval = 300 * time.Millisecond
	h := startHarness(t, cfg)
	h.waitLive(c, 1)
	var newer []*oh.Conversation
	for range 120 { // the head's page is theirs
		newer = append(newer, createConversation(t, stub))
	}
	for _, n := range newer {
		h.waitLive(n, 1)
	}
	waitSockets(t, c, 0) // idle: detached

	mustStatus(t, c, oh.StatusPaused)
	waitSockets(t, c, 1)
}

// TestStartAtEnd: with start_at: end, a conversation the start finds is
// observed from then on, its history not read; one created later is read
// from its beginning.
func TestStartAtEnd(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		old := createConversation(t, stub)
		mustAppend(t, old, oh.MessageEvent("user", "before the start"))
		cfg := fastConfig(socket, stub)
		cfg.StartAt = startAtEnd
		h := startHarness(t, cfg)
		h.waitLive(old, 1)
		mustAppend(t, old, oh.TerminalAction("ls"))
		got := h.waitTypes(old.ID(), "tool.requested")
		assert.Zero(t, count(got, "x.openhands.message.event"), "the history before the start is not read")

		later := createConversation(t, stub)
		mustAppend(t, later, oh.MessageEvent("user", "created after the start"))
		h.waitLive(later, 1)
		h.waitTypes(later.ID(), "x.openhands.message.event")
		h.validate()
	})
}

// TestFullListingIsSpreadOverRounds: the full listing of the first
// rounds reads at most fullPagesPerRound pages a round, beside the head,
// so a conversation with new activity is seen at the next round however
// many the server holds.
func TestFullListingIsSpreadOverRounds(t *testing.T) {
	stub := startStub(t)
	for range 1100 {
		createConversation(t, stub)
	}
	h := startHarness(t, fastConfig(socketSession, stub))
	waitRounds(t, stub, 1)
	fresh := createConversation(t, stub)
	mustAppend(t, fresh, oh.MessageEvent("user", "new activity"))
	h.waitTypes(fresh.ID(), "x.openhands.message.event")
	waitRounds(t, stub, 2)

	pages, full := 0, 0
	for _, r := range stub.Requests() {
		switch {
		case r.Path == "/api/conversations/count":
			assert.LessOrEqual(t, pages, fullPagesPerRound, "full listing pages in a round")
			pages = 0
		case r.Path == "/api/conversations/search":
			q, err := url.ParseQuery(r.RawQuery)
			require.NoError(t, err)
			if q.Get("sort_order") == "CREATED_AT" {
				pages++
				full++
			}
		}
	}
	assert.Equal(t, 12, full, "1,101 conversations (fresh among them), listed once")
}
