package openhandstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"time"
)

// Request is one recorded HTTP request (REST, health, and WebSocket
// upgrades alike).
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
	// Status is the HTTP status answered; 101 for an accepted upgrade.
	Status int
	At     time.Time
	// RemoteAddr is the client's address: requests on one connection
	// share it.
	RemoteAddr string
}

// IsWrite reports whether the request can change server state: anything but
// GET and HEAD.
func (r Request) IsWrite() bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead
}

// Endpoint names a WebSocket endpoint.
type Endpoint string

const (
	// EndpointEvents is the legacy socket /sockets/events/{conversation_id}.
	EndpointEvents Endpoint = "/sockets/events"
	// EndpointSession is the envelope socket /sockets/session/{conversation_id}.
	EndpointSession Endpoint = "/sockets/session"
)

// InboundFrame is one recorded client-to-server WebSocket data frame.
type InboundFrame struct {
	// ConnID numbers connections in accept order, starting at 1.
	ConnID         int
	Endpoint       Endpoint
	ConversationID string
	// MessageType is websocket.TextMessage or websocket.BinaryMessage.
	MessageType int
	Data        []byte
	At          time.Time
}

// IsAuth reports whether the frame is an auth control frame: a JSON object
// with type "auth" and no keys besides type and session_api_key.
func (f InboundFrame) IsAuth() bool {
	var v any
	if err := json.Unmarshal(f.Data, &v); err != nil {
		return false
	}
	return isAuthControl(v)
}

func isAuthControl(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || m["type"] != "auth" {
		return false
	}
	for k := range m {
		if k != "type" && k != "session_api_key" {
			return false
		}
	}
	return true
}

// Requests returns every recorded HTTP request, GETs included, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Writes returns the recorded requests that are not GET or HEAD.
func (s *Server) Writes() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if r.IsWrite() {
			out = append(out, r)
		}
	}
	return out
}

// InboundFrames returns every recorded inbound WebSocket data frame, auth
// frames included, in arrival order.
func (s *Server) InboundFrames() []InboundFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]InboundFrame(nil), s.frames...)
}

// ResetRecording forgets recorded requests and frames.
func (s *Server) ResetRecording() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	s.frames = nil
	s.recordingGen++
}

func (s *Server) recordFrame(sc *socketConn, messageType int, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frames = append(s.frames, InboundFrame{
		ConnID:         sc.id,
		Endpoint:       sc.endpoint,
		ConversationID: sc.conversationID,
		MessageType:    messageType,
		Data:           append([]byte(nil), data...),
		At:             time.Now(),
	})
}

// maxRecordedBody bounds how much of a request body is read.
const maxRecordedBody = 8 << 20

// recordRequests wraps h so that every request is recorded with its status.
func (s *Server) recordRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(io.LimitReader(r.Body, maxRecordedBody))
			_ = r.Body.Close()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		s.mu.Lock()
		idx, gen := len(s.requests), s.recordingGen
		s.requests = append(s.requests, Request{
			Method:     r.Method,
			Path:       r.URL.Path,
			RawQuery:   r.URL.RawQuery,
			Header:     r.Header.Clone(),
			Body:       body,
			At:         time.Now(),
			RemoteAddr: r.RemoteAddr,
		})
		s.mu.Unlock()
		rec := &statusRecorder{ResponseWriter: w, onStatus: func(status int) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if gen == s.recordingGen { // ResetRecording may have run meanwhile
				s.requests[idx].Status = status
			}
		}}
		h.ServeHTTP(rec, r)
		if !rec.wrote {
			rec.onStatus(http.StatusOK)
		}
	})
}

// statusRecorder reports the status as soon as it is known (a hijacked
// socket's handler runs for as long as the socket) and still lets gorilla
// hijack the connection.
type statusRecorder struct {
	http.ResponseWriter
	onStatus func(int)
	wrote    bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.wrote = true
		r.onStatus(code)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.wrote = true
		r.onStatus(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil && !r.wrote {
		r.wrote = true
		r.onStatus(http.StatusSwitchingProtocols)
	}
	return conn, rw, err
}
