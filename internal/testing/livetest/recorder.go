package livetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// errNoUpstream answers the receiver while the agent server restarts.
var errNoUpstream = errors.New("agent server is down")

// Recorder is the live Front's handler: it relays every request to the
// agent server at upstream and records the exchange.
type Recorder struct {
	client   *http.Client
	upgrader websocket.Upgrader

	mu       sync.Mutex
	upstream *url.URL
	rest     []Exchange
	sockets  []*Socket
	conns    map[*websocket.Conn]struct{}
}

// NewRecorder relays to the agent server at upstream (http://host:port).
func NewRecorder(upstream string) (*Recorder, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	return &Recorder{
		upstream: u,
		client:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}},
		conns:    make(map[*websocket.Conn]struct{}),
	}, nil
}

// SetUpstream points the recorder at a restarted agent server.
func (rec *Recorder) SetUpstream(upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil {
		return err
	}
	rec.mu.Lock()
	rec.upstream = u
	rec.mu.Unlock()
	return nil
}

func (rec *Recorder) target(r *http.Request, scheme string) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	u := *rec.upstream
	u.Scheme = scheme
	u.Path = r.URL.Path
	u.RawQuery = r.URL.RawQuery
	return u.String()
}

// Transcript returns a copy of everything recorded so far.
func (rec *Recorder) Transcript() *Transcript {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t := &Transcript{REST: append([]Exchange(nil), rec.rest...)}
	for _, s := range rec.sockets {
		c := *s
		c.FromServer = append([]json.RawMessage(nil), s.FromServer...)
		c.FromReceiver = append([]json.RawMessage(nil), s.FromReceiver...)
		t.Sockets = append(t.Sockets, c)
	}
	return t
}

// Close drops every relayed socket.
func (rec *Recorder) Close() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for c := range rec.conns {
		c.Close()
	}
}

func (rec *Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if websocket.IsWebSocketUpgrade(r) {
		rec.relaySocket(w, r)
		return
	}
	rec.relayREST(w, r)
}

func (rec *Recorder) relayREST(w http.ResponseWriter, r *http.Request) {
	ex := Exchange{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery}
	defer func() {
		rec.mu.Lock()
		rec.rest = append(rec.rest, ex)
		rec.mu.Unlock()
	}()
	req, err := http.NewRequestWithContext(r.Context(), r.Method, rec.target(r, "http"), r.Body)
	if err != nil {
		ex.Status = http.StatusBadGateway
		http.Error(w, err.Error(), ex.Status)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := rec.client.Do(req)
	if err != nil {
		ex.Status = http.StatusBadGateway
		http.Error(w, errNoUpstream.Error()+": "+err.Error(), ex.Status)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		ex.Status = http.StatusBadGateway
		http.Error(w, err.Error(), ex.Status)
		return
	}
	ex.Status = resp.StatusCode
	if json.Valid(body) {
		var compact bytes.Buffer
		_ = json.Compact(&compact, body)
		ex.Body = compact.Bytes()
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// relaySocket dials the agent server, then upgrades the receiver and pumps
// both ways, recording every frame. The server's handshake refusal reaches
// the receiver as it was.
func (rec *Recorder) relaySocket(w http.ResponseWriter, r *http.Request) {
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second} // direct: no proxy
	up, resp, err := dialer.DialContext(r.Context(), rec.target(r, "ws"), nil)
	if err != nil {
		status := http.StatusBadGateway
		if resp != nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		http.Error(w, "upstream socket: "+err.Error(), status)
		return
	}
	down, err := rec.upgrader.Upgrade(w, r, nil)
	if err != nil {
		up.Close()
		return
	}
	s := &Socket{Path: r.URL.Path, Query: r.URL.RawQuery, FromServer: []json.RawMessage{}, FromReceiver: []json.RawMessage{}}
	rec.mu.Lock()
	rec.sockets = append(rec.sockets, s)
	rec.conns[up], rec.conns[down] = struct{}{}, struct{}{}
	rec.mu.Unlock()
	defer func() {
		rec.mu.Lock()
		delete(rec.conns, up)
		delete(rec.conns, down)
		rec.mu.Unlock()
		up.Close()
		down.Close()
	}()

	done := make(chan struct{})
	go func() {
		defer close(done)
		// Receiver → server: recorded as sent, relayed as sent.
		for {
			kind, data, err := down.ReadMessage()
			if err != nil {
				up.Close()
				return
			}
			rec.mu.Lock()
			s.FromReceiver = append(s.FromReceiver, rawFrame(data))
			rec.mu.Unlock()
			if up.WriteMessage(kind, data) != nil {
				return
			}
		}
	}()
	for {
		kind, data, err := up.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				rec.mu.Lock()
				s.Close = &Close{Code: ce.Code, Text: ce.Text}
				rec.mu.Unlock()
				_ = down.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(ce.Code, ce.Text), time.Now().Add(time.Second))
			}
			down.Close()
			break
		}
		rec.mu.Lock()
		s.FromServer = append(s.FromServer, rawFrame(data))
		rec.mu.Unlock()
		if down.WriteMessage(kind, data) != nil {
			break
		}
	}
	<-done
}

// rawFrame keeps a JSON frame as JSON and anything else as a JSON string.
func rawFrame(data []byte) json.RawMessage {
	if json.Valid(data) {
		return append(json.RawMessage(nil), data...)
	}
	s, _ := json.Marshal(strings.ToValidUTF8(string(data), "\uFFFD"))
	return s
}

// Attached reports whether a socket to conversation id is up and the
// server has sent on it (the connect snapshot or sync).
func (rec *Recorder) Attached(id string) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, s := range rec.sockets {
		if conversationOf(s.Path) == id && s.Close == nil && len(s.FromServer) > 0 {
			return true
		}
	}
	return false
}
