package livetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Replayer is the replay Front's handler: it answers as the agent server
// answered in a Transcript. REST answers are served by exact path and
// query, the n-th request of a kind getting the n-th recorded answer (the
// last one repeating); the n-th socket of a conversation gets the n-th
// recorded socket's server frames, verbatim and in order, then the close
// the server sent, if it sent one. Conversation search lists every
// conversation the recording saw, with its last recorded info, whatever
// the order asked, and the count and the lookups by id agree with it. One the
// recording saw deleted ends as the receiver learnt of it live, after every
// frame: its last socket is closed once its frames are sent, the reconnect
// is refused 4004 as the real server refuses an unknown id, and from then
// on search no longer lists it and its REST paths answer 404.
type Replayer struct {
	t        *Transcript
	upgrader websocket.Upgrader

	mu       sync.Mutex
	served   map[string]int // REST answers served per method+path+query
	opened   map[string]int // sockets served per conversation
	refused  map[string]bool
	problems []string
	conns    map[*websocket.Conn]struct{}

	ids     []string // of t.Conversations
	deleted map[string]bool
}

// NewReplayer serves t.
func NewReplayer(t *Transcript) *Replayer {
	t = t.Compact()
	r := &Replayer{
		t: t, served: map[string]int{}, opened: map[string]int{}, refused: map[string]bool{},
		conns: map[*websocket.Conn]struct{}{}, deleted: map[string]bool{},
	}
	for _, info := range t.Conversations {
		r.ids = append(r.ids, conversationID(info))
	}
	for _, id := range t.Deleted {
		r.deleted[id] = true
	}
	return r
}

// Problems lists every request the recording had no answer for.
func (r *Replayer) Problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.problems...)
}

// Drained reports whether every recorded socket has been served.
func (r *Replayer) Drained() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.t.Sockets {
		id := conversationOf(s.Path)
		if r.opened[id] < r.recordedSockets(id) {
			return false
		}
	}
	return true
}

// recordedSockets counts the recorded sockets of conversation id.
func (r *Replayer) recordedSockets(id string) int {
	n := 0
	for _, s := range r.t.Sockets {
		if conversationOf(s.Path) == id {
			n++
		}
	}
	return n
}

// Close drops every socket.
func (r *Replayer) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
}

func (r *Replayer) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

func (r *Replayer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case websocket.IsWebSocketUpgrade(req):
		r.serveSocket(w, req)
	case req.Method == http.MethodGet && req.URL.Path == "/api/conversations/search":
		r.serveSearch(w)
	case req.Method == http.MethodGet && req.URL.Path == "/api/conversations/count":
		writeJSON(w, r.count())
	case req.Method == http.MethodGet && req.URL.Path == "/api/conversations":
		r.serveBatch(w, req.URL.Query()["ids"])
	default:
		r.serveRecorded(w, req)
	}
}

func (r *Replayer) serveSearch(w http.ResponseWriter) {
	items := []json.RawMessage{}
	for _, id := range r.ids {
		if info, ok := r.listed(id); ok {
			items = append(items, info)
		}
	}
	writeJSON(w, map[string]any{"items": items, "next_page_id": nil})
}

// listed is the last recorded info of conversation id, when search lists
// it.
func (r *Replayer) listed(id string) (json.RawMessage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, recorded := range r.ids {
		if recorded == id && !r.refused[id] {
			return r.t.Conversations[i], true
		}
	}
	return nil, false
}

// count is how many conversations search lists.
func (r *Replayer) count() int {
	n := 0
	for _, id := range r.ids {
		if _, ok := r.listed(id); ok {
			n++
		}
	}
	return n
}

// serveBatch answers GET /api/conversations?ids=...: what search lists of
// each id, null for the others.
func (r *Replayer) serveBatch(w http.ResponseWriter, ids []string) {
	out := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		out[i] = json.RawMessage("null")
		if info, ok := r.listed(id); ok {
			out[i] = info
		}
	}
	writeJSON(w, out)
}

func (r *Replayer) serveRecorded(w http.ResponseWriter, req *http.Request) {
	key := req.Method + " " + req.URL.Path + "?" + req.URL.RawQuery
	var answers []Exchange
	for _, ex := range r.t.REST {
		if ex.Method == req.Method && ex.Path == req.URL.Path && ex.Query == req.URL.RawQuery && ex.Status != http.StatusBadGateway {
			answers = append(answers, ex)
		}
	}
	if len(answers) == 0 && r.gone(conversationOf(req.URL.Path)) {
		// After the recording: the server no longer knows the id.
		writeStatus(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
		return
	}
	if len(answers) == 0 {
		r.problem("no recorded answer for %s", key)
		http.Error(w, "not in the recording: "+key, http.StatusNotImplemented)
		return
	}
	r.mu.Lock()
	n := r.served[key]
	r.served[key]++
	r.mu.Unlock()
	ex := answers[min(n, len(answers)-1)]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ex.Status)
	_, _ = w.Write(ex.Body)
}

func writeJSON(w http.ResponseWriter, v any) { writeStatus(w, http.StatusOK, v) }

func writeStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// gone reports whether id is a conversation the recording saw deleted and
// whose recorded sockets have all been served.
func (r *Replayer) gone(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return id != "" && r.deleted[id] && r.opened[id] >= r.recordedSockets(id)
}

// serveSocket plays the conversation's next recorded socket.
func (r *Replayer) serveSocket(w http.ResponseWriter, req *http.Request) {
	id := conversationOf(req.URL.Path)
	r.mu.Lock()
	n := r.opened[id]
	var rec *Socket
	for i := range r.t.Sockets {
		if conversationOf(r.t.Sockets[i].Path) != id {
			continue
		}
		if n == 0 {
			rec = &r.t.Sockets[i]
			break
		}
		n--
	}
	r.opened[id]++
	nth := r.opened[id]
	r.mu.Unlock()
	if rec != nil && (rec.Path != req.URL.Path || rec.Query != req.URL.RawQuery) {
		r.problem("socket %s?%s where the recording has %s?%s", req.URL.Path, req.URL.RawQuery, rec.Path, rec.Query)
	}
	conn, err := r.upgrader.Upgrade(w, req, nil)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.conns[conn] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.conns, conn)
		r.mu.Unlock()
		conn.Close()
	}()
	// The first-message auth frame comes before anything is sent.
	if _, _, err := conn.ReadMessage(); err != nil {
		return
	}
	left := make(chan struct{})
	go func() {
		defer close(left)
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}()
	closeWith := func(c Close) {
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(c.Code, c.Text), time.Now().Add(time.Second))
	}
	if rec == nil {
		r.mu.Lock()
		gone := r.deleted[id]
		r.refused[id] = r.refused[id] || gone
		r.mu.Unlock()
		if gone {
			closeWith(Close{Code: 4004, Text: "Conversation not found"})
			return
		}
		r.problem("socket %d of %s is not in the recording", nth, id)
		return
	}
	for _, f := range rec.FromServer {
		if conn.WriteMessage(websocket.TextMessage, f) != nil {
			return
		}
	}
	if rec.Close != nil {
		closeWith(*rec.Close)
		return
	}
	if r.deleted[id] && nth == r.recordedSockets(id) {
		// The real server leaves a deleted conversation's socket open. Once
		// its frames are sent, close it: the receiver reconnects only after
		// it has processed every one, is refused 4004, and only then does
		// search stop listing the conversation, so the deletion reaches the
		// receiver after the frames, as it did live.
		closeWith(Close{Code: websocket.CloseGoingAway, Text: "replay: recorded frames sent"})
		return
	}
	// The recorded socket stayed open: so does this one, until the
	// receiver leaves.
	<-left
}
