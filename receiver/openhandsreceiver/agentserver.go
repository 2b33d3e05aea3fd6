package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// serverClient is the receiver's client of one OpenHands agent server:
// REST GETs and the events socket with its auth frame.
// Nothing else here, or anywhere in the receiver, writes to the server.
type serverClient struct {
	name     string
	base     *url.URL
	hostPort string
	key      configopaque.String
	client   *http.Client
	dialer   *websocket.Dialer
	maxFrame int64
	sockets  socketSettings // how its conversation sockets are read
	// sessionOnly is `socket: session`; legacyOnly is `socket: events`, or
	// what `auto` learned from a server without /sockets/session.
	sessionOnly bool
	legacyOnly  atomic.Bool
	// largestFrame is the largest frame the server has delivered: its own
	// frame cap is at least that.
	largestFrame atomic.Int64
}

func (s *serverClient) sawFrame(n int) {
	for {
		cur := s.largestFrame.Load()
		if int64(n) <= cur || s.largestFrame.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

const (
	// maxResponseBytes bounds one REST response body.
	maxResponseBytes = 64 << 20
	// maxSearchPages stops a server whose next_page_id never ends.
	maxSearchPages = 10_000
	// authWriteTimeout keeps the auth frame well inside the server's 10 s
	// first-message window.
	authWriteTimeout = 5 * time.Second
	pageLimit        = "100"
)

// errAuthRejected marks a 401 from REST or a 4001 close from the socket:
// the configured key is wrong, retrying will not help.
var errAuthRejected = errors.New("agent server rejected the session API key")

// errRedirectRefused answers every redirect: the agent server API never
// redirects, and a followed redirect would carry the session key (and a
// control write's text) to whatever host it names.
var errRedirectRefused = errors.New("refused to follow a redirect: the agent server API never redirects, and following it would send the session API key elsewhere")

// refuseRedirect is the CheckRedirect of every client that carries the key.
func refuseRedirect(*http.Request, []*http.Request) error { return errRedirectRefused }

// conversationInfo is the part of ConversationInfo the receiver reads.
type conversationInfo struct {
	ID              string `json:"id"`
	ExecutionStatus string `json:"execution_status"`
	CreatedAt       string `json:"created_at"`
	UpdatedAt       string `json:"updated_at"`
	// The conversation tree (tree.go), as served: checked where used.
	ParentConversationID     string `json:"parent_conversation_id"`
	ForkedFromConversationID string `json:"forked_from_conversation_id"`
	ForkedFromEventID        string `json:"forked_from_event_id"`
}

// searchItem is one ConversationInfo as served, decoded on its own so that
// a bad item does not fail its page: info is usable when skip is "".
type searchItem struct {
	info conversationInfo
	skip string // why the item is skipped: skipMalformed or skipID
	err  error
}

// Reasons a search item is skipped (otelcol_openhands_search_items_skipped).
const (
	skipMalformed = "malformed" // not a ConversationInfo
	skipID        = "id"        // an id not of the server's form
)

func (it *searchItem) UnmarshalJSON(data []byte) error {
	if err := json.Unmarshal(data, &it.info); err != nil {
		it.skip, it.err = skipMalformed, fmt.Errorf("not a ConversationInfo: %w", err)
		return nil
	}
	id, ok := mapping.ConversationID(it.info.ID)
	if !ok {
		it.skip, it.err = skipID, fmt.Errorf("id %s is not a conversation id (a UUID)", quoteID(it.info.ID))
		return nil
	}
	it.info.ID = id
	return nil
}

// quoteID quotes a server-supplied id for a log line or an error, cut
// short: a hostile server picks its length.
func quoteID(id string) string {
	const maxShown = 64
	if len(id) > maxShown {
		return strconv.Quote(id[:maxShown]) + "…"
	}
	return strconv.Quote(id)
}

type conversationPage struct {
	Items      []searchItem `json:"items"`
	NextPageID *string      `json:"next_page_id"`
}

type eventPage struct {
	Items      []json.RawMessage `json:"items"`
	NextPageID *string           `json:"next_page_id"`
}

// Conversation search orders (the server's ConversationSortOrder).
const (
	// byUpdate lists the most recently updated first: a discovery round
	// reads only the head of it, what moved since the last round.
	byUpdate = "UPDATED_AT_DESC"
	// byCreation lists the oldest first. created_at never moves, so a
	// full listing in this order is not reshuffled while it is paged.
	byCreation = "CREATED_AT"
)

// staleListingPages is how many pages in a row a moving conversation
// listing may show nothing new from an anchor already followed: each
// time an anchor is updated before it is asked for, the server pages on
// from the front.
const staleListingPages = 3

// firstPage is the page_id of a listing's first page: none.
const firstPage = ""

// searchConversations pages GET /api/conversations/search in order from
// the page id from (firstPage: the start), passing next_page_id back
// verbatim and each page's items to page, until the listing ends or page
// wants no more; next is then the page id it would go on from ("" at the
// listing's end). A listing that moves
// while it is paged (an anchor updated meanwhile jumps to the front, and
// the server pages on from there) is followed: only more than
// staleListingPages pages in a row that show no conversation the listing
// had not and name a page id already followed are a loop.
func (s *serverClient) searchConversations(ctx context.Context, order, from string, page func([]searchItem) (more bool)) (next string, err error) {
	shown := make(map[string]bool)
	q := url.Values{"sort_order": {order}}
	if from != firstPage {
		q.Set("page_id", from)
	}
	err = s.pages(ctx, "/api/conversations/search", q, staleListingPages, func(body []byte) (*string, bool, error) {
		var p conversationPage
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, false, fmt.Errorf("conversation search page is not a ConversationPage: %w", err)
		}
		fresh := false
		for _, item := range p.Items {
			if item.err == nil && !shown[item.info.ID] {
				shown[item.info.ID], fresh = true, true
			}
		}
		if !page(p.Items) {
			if p.NextPageID != nil {
				next = *p.NextPageID
			}
			return nil, fresh, nil
		}
		return p.NextPageID, fresh, nil
	})
	return next, err
}

// countConversations reads GET /api/conversations/count: how many
// conversations the server holds.
func (s *serverClient) countConversations(ctx context.Context) (int, error) {
	const path = "/api/conversations/count"
	body, err := s.get(ctx, path, url.Values{})
	if err != nil {
		return 0, err
	}
	var n int
	if err := json.Unmarshal(body, &n); err != nil || n < 0 {
		return 0, fmt.Errorf("GET %s: not a count: %s", path, quoteID(string(body)))
	}
	return n, nil
}

// maxBatchIDs is how many ids one GET /api/conversations may name.
const maxBatchIDs = 99

// lookup is what the server answered for one id of a batch.
type lookup struct {
	info conversationInfo
	gone bool  // the server answered null: it has no such conversation
	err  error // the item cannot be read: nothing is known
}

// conversations reads the ConversationInfo of up to maxBatchIDs ids in
// one GET /api/conversations?ids=..., the server answering null for each
// one it does not have. An answer of the wrong length fails the batch; an
// item that is not the conversation asked for is an error of that item.
func (s *serverClient) conversations(ctx context.Context, ids []string) ([]lookup, error) {
	const path = "/api/conversations"
	body, err := s.get(ctx, path, url.Values{"ids": ids})
	if err != nil {
		return nil, err
	}
	var items []*searchItem
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, fmt.Errorf("GET %s: not a list of ConversationInfo: %w", path, err)
	}
	if len(items) != len(ids) {
		return nil, fmt.Errorf("GET %s: %d answers for %d ids", path, len(items), len(ids))
	}
	out := make([]lookup, len(ids))
	for i, it := range items {
		switch {
		case it == nil:
			out[i].gone = true
		case it.err != nil:
			out[i].err = it.err
		case it.info.ID != ids[i]:
			out[i].err = fmt.Errorf("GET %s: the answer for %s is for conversation %s", path, ids[i], quoteID(it.info.ID))
		default:
			out[i].info = it.info
		}
	}
	return out, nil
}

// errNotFound is the server's 404: for GET /api/conversations/{id}, the
// conversation is gone.
var errNotFound = errors.New("not found")

// conversation reads one conversation's ConversationInfo by id.
func (s *serverClient) conversation(ctx context.Context, id string) (conversationInfo, error) {
	path := "/api/conversations/" + url.PathEscape(id)
	body, err := s.get(ctx, path, url.Values{})
	if err != nil {
		return conversationInfo{}, err
	}
	var it searchItem
	if err := json.Unmarshal(body, &it); err != nil {
		return conversationInfo{}, fmt.Errorf("GET %s: not JSON: %w", path, err)
	}
	switch {
	case it.err != nil:
		return conversationInfo{}, fmt.Errorf("GET %s: %w", path, it.err)
	case it.info.ID != id:
		return conversationInfo{}, fmt.Errorf("GET %s: the answer is for conversation %s", path, quoteID(it.info.ID))
	}
	return it.info, nil
}

// storedEvent is one stored event read over REST by itself: raw when it
// fit the limit, else only the head fields and the size.
type storedEvent struct {
	id, kind, timestamp string
	size                int64 // bytes as served: the event, or its one-item page when too large
	raw                 []byte
}

const (
	// pageSlack is the room a one-item search page needs around its item.
	pageSlack = 4 << 10
	// headBytes is how much of an oversize page is scanned for the event's
	// kind, id and timestamp, which the server serializes first.
	headBytes = 4 << 10
)

// storedEventAfter reads the stored event that follows seq (whose event id
// is prevID; seq -1 for the log's first event) over events/search, whose
// pages the socket's frame cap does not apply to. It holds at most limit
// bytes of it. nil means no stored event follows.
func (s *serverClient) storedEventAfter(ctx context.Context, conversationID string, seq int64, prevID string, limit int64) (*storedEvent, error) {
	path := "/api/conversations/" + url.PathEscape(conversationID) + "/events/search"
	q := url.Values{"sort_order": {"TIMESTAMP"}, "limit": {"1"}}
	want := ""
	if seq >= 0 {
		if prevID == "" {
			return nil, fmt.Errorf("the event at seq %d has no known id to page from", seq)
		}
		// page_id is an inclusive start and next_page_id the first id of
		// the next page: a one-item page from the last event processed
		// names the next one without carrying it.
		var p struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextPageID *string `json:"next_page_id"`
		}
		q.Set("page_id", prevID)
		body, err := s.get(ctx, path, q)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("GET %s: event search page is not an event page: %w", path, err)
		}
		if len(p.Items) != 1 || p.Items[0].ID != prevID {
			return nil, fmt.Errorf("GET %s: the page from event %s does not start with it", path, prevID)
		}
		if p.NextPageID == nil || *p.NextPageID == "" {
			return nil, nil
		}
		want = *p.NextPageID
		q.Set("page_id", want)
	}
	resp, err := s.do(ctx, path, q)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+pageSlack+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", path, err)
	}
	var ev storedEvent
	if int64(len(body)) <= limit+pageSlack {
		var p eventPage
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("GET %s: event search page is not an event page: %w", path, err)
		}
		if len(p.Items) == 0 {
			return nil, nil
		}
		ev.raw, ev.size = p.Items[0], int64(len(p.Items[0]))
		ev.id, ev.kind, ev.timestamp = scanEventHead(ev.raw, false)
	} else {
		// Too large to hold: name it from its head and count the rest. A
		// body cut short by the client timeout leaves a lower bound.
		ev.id, ev.kind, ev.timestamp = scanEventHead(body[:headBytes], true)
		rest, _ := io.Copy(io.Discard, resp.Body)
		ev.size = int64(len(body)) + rest
	}
	switch {
	case want == "" && ev.id == "":
		return nil, fmt.Errorf("GET %s: the first stored event has no id within its first %d bytes", path, headBytes)
	case want != "" && ev.id != "" && ev.id != want:
		return nil, fmt.Errorf("GET %s: asked for event %s, got %s", path, want, ev.id)
	case ev.id == "":
		ev.id = want
	}
	return &ev, nil
}

// scanEventHead reads the kind, id and timestamp of an event from the
// start of its JSON (inPage: of the search page holding it), as far as the
// bytes go: a cut-off value ends the scan with what was found.
func scanEventHead(data []byte, inPage bool) (id, kind, timestamp string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if inPage && !enterItems(dec) {
		return "", "", ""
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", "", ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			break
		}
		value, err := dec.Token()
		if err != nil {
			break
		}
		if d, ok := value.(json.Delim); ok {
			if skipNested(dec, d) != nil {
				break
			}
			continue
		}
		if v, ok := value.(string); ok {
			switch key {
			case "id":
				id = v
			case "kind":
				kind = v
			case "timestamp":
				timestamp = v
			}
		}
	}
	return id, kind, timestamp
}

// enterItems advances a page decoder to just inside its items array.
func enterItems(dec *json.Decoder) bool {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		if key == "items" {
			t, err := dec.Token()
			return err == nil && t == json.Delim('[')
		}
		value, err := dec.Token()
		if err != nil {
			return false
		}
		if d, ok := value.(json.Delim); ok && skipNested(dec, d) != nil {
			return false
		}
	}
	return false
}

// skipNested consumes the rest of an object or array whose opening
// delimiter was just read.
func skipNested(dec *json.Decoder, open json.Delim) error {
	if open != '{' && open != '[' {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// searchEvents pages GET /api/conversations/{id}/events/search in log order,
// from timestamp__gte=since when since is set, handing each raw item to fn.
func (s *serverClient) searchEvents(ctx context.Context, conversationID, since string, fn func(json.RawMessage) error) error {
	q := url.Values{"sort_order": {"TIMESTAMP"}}
	if since != "" {
		q.Set("timestamp__gte", since)
	}
	return s.pages(ctx, "/api/conversations/"+url.PathEscape(conversationID)+"/events/search", q, 0, func(body []byte) (*string, bool, error) {
		var p eventPage
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, false, fmt.Errorf("event search page is not an event page: %w", err)
		}
		for _, item := range p.Items {
			if err := fn(item); err != nil {
				return nil, false, err
			}
		}
		// The log only grows at its end: a page id met again is a loop.
		return p.NextPageID, false, nil
	})
}

// pages follows next_page_id until it is null. page reports whether its
// page showed something the listing had not (fresh). A page that is not
// fresh and names a page id already followed is stale: more than
// staleAllowed of them in a row is the server's paging looping, an
// error, as is a listing past maxSearchPages.
func (s *serverClient) pages(ctx context.Context, path string, q url.Values, staleAllowed int, page func([]byte) (next *string, fresh bool, err error)) error {
	q.Set("limit", pageLimit)
	followed := make(map[string]bool)
	stale := 0
	for n := 0; ; n++ {
		if n >= maxSearchPages {
			return fmt.Errorf("GET %s: more than %d pages", path, maxSearchPages)
		}
		body, err := s.get(ctx, path, q)
		if err != nil {
			return err
		}
		next, fresh, err := page(body)
		switch {
		case err != nil:
			return fmt.Errorf("GET %s: %w", path, err)
		case next == nil || *next == "":
			return nil
		case !followed[*next] || fresh:
			stale = 0
		case stale >= staleAllowed:
			return fmt.Errorf("GET %s: next_page_id %q repeats and the pages show nothing new: the server's paging loops", path, *next)
		default:
			stale++
		}
		followed[*next] = true
		q.Set("page_id", *next)
	}
}

// get reads one REST response whole, at most maxResponseBytes.
func (s *serverClient) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	resp, err := s.do(ctx, path, q)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("GET %s: reading body: %w", path, err)
	case len(body) > maxResponseBytes:
		return nil, fmt.Errorf("GET %s: response larger than %d bytes", path, maxResponseBytes)
	}
	return body, nil
}

// do sends a GET, the receiver's only REST verb, and returns a 200
// response for the caller to read and close.
func (s *serverClient) do(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	u := s.base.JoinPath(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json")
	if s.key != "" {
		req.Header.Set("X-Session-API-Key", string(s.key))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("GET %s: %s: %w", path, resp.Status, errAuthRejected)
	case http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: %s: %w", path, resp.Status, errNotFound)
	}
	return nil, fmt.Errorf("GET %s: unexpected status %s", path, resp.Status)
}

// Socket endpoints a server may offer (ServerConfig.Socket).
const (
	socketAuto    = "auto"
	socketEvents  = "events"
	socketSession = "session"
)

// errNoSessionSocket is the handshake refusal of a server that predates
// /sockets/session (v1.45.0): its router refuses unknown WebSocket paths
// before accept, which the client sees as 403 or 404.
var errNoSessionSocket = errors.New("agent server has no /sockets/session endpoint")

// dialConversation opens the conversation's socket: /sockets/session when
// the server has it (replaying every durable event after afterSeq, or,
// liveOnly, none), else the legacy /sockets/events, live-only. session
// reports which; fc is the connection under it, nil where it cannot be
// had (frameDialer).
func (s *serverClient) dialConversation(ctx context.Context, conversationID string, afterSeq int64, liveOnly bool) (conn *websocket.Conn, fc *frameConn, session bool, err error) {
	if !s.legacyOnly.Load() {
		q := url.Values{"after_seq": {strconv.FormatInt(afterSeq, 10)}}
		if liveOnly {
			q = nil
		}
		conn, fc, err = s.dial(ctx, "/sockets/session", conversationID, q)
		switch {
		case err == nil:
			return conn, fc, true, nil
		case !errors.Is(err, errNoSessionSocket) || s.sessionOnly:
			return nil, nil, false, err
		}
		// auto: an older server. Remember it, so later attaches go straight
		// to the legacy socket.
		s.legacyOnly.Store(true)
	}
	conn, fc, err = s.dial(ctx, "/sockets/events", conversationID, nil)
	return conn, fc, false, err
}

// dial opens one socket and authenticates with the first-message auth
// frame. The key never rides in the URL, where proxies would log it. The
// legacy socket is opened without resend_mode (live-only): the receiver
// pages history over REST itself, so replay never interleaves with live
// frames.
func (s *serverClient) dial(ctx context.Context, prefix, conversationID string, q url.Values) (*websocket.Conn, *frameConn, error) {
	u, err := endpoint.WebSocket(s.base.JoinPath(prefix, conversationID))
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", prefix, err)
	}
	u.RawQuery = q.Encode()
	dialer, fc := frameDialer(s.dialer, u)
	conn, resp, err := dialer.DialContext(ctx, u.String(), nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		switch {
		case resp == nil:
			return nil, nil, fmt.Errorf("dial %s: %w", prefix, err)
		case prefix == "/sockets/session" && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden):
			return nil, nil, fmt.Errorf("dial %s: %s: %w", prefix, resp.Status, errNoSessionSocket)
		case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized:
			return nil, nil, fmt.Errorf("dial %s: %s: %w", prefix, resp.Status, errAuthRejected)
		default:
			return nil, nil, fmt.Errorf("dial %s: %s: %w", prefix, resp.Status, err)
		}
	}
	if *fc != nil {
		(*fc).startFrames(s.sockets.frames) // the handshake is read: frames follow
	}
	if err := s.sendAuthFrame(conn); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, *fc, nil
}

// sendAuthFrame writes {"type":"auth","session_api_key":...}: the only
// frame the receiver ever writes to an agent server. Without a configured
// key the server accepts at once and nothing is written.
func (s *serverClient) sendAuthFrame(conn *websocket.Conn) error {
	if s.key == "" {
		return nil
	}
	frame, err := json.Marshal(struct {
		Type          string `json:"type"`
		SessionAPIKey string `json:"session_api_key"`
	}{"auth", string(s.key)})
	if err != nil {
		return fmt.Errorf("encode auth frame: %w", err)
	}
	if err := conn.SetWriteDeadline(time.Now().Add(authWriteTimeout)); err != nil {
		return fmt.Errorf("send auth frame: %w", err)
	}
	if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		return fmt.Errorf("send auth frame: %w", err)
	}
	return conn.SetWriteDeadline(time.Time{})
}

// hostPortOf returns host:port of the endpoint with the scheme's default
// port filled in, the stable server identity inside AEP sources.
func hostPortOf(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	return net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
}
