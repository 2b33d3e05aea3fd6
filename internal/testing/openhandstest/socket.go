package openhandstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gorilla/websocket"
)

// closeGrace is how long a closing connection waits for the client's close
// echo before dropping TCP, so the close frame is not lost to a reset.
const closeGrace = time.Second

// maxInboundFrame bounds what a client may send in one frame.
const maxInboundFrame = 16 << 20

var upgrader = websocket.Upgrader{
	HandshakeTimeout: 10 * time.Second, // also bounds the 101 response write
	CheckOrigin:      func(*http.Request) bool { return true },
}

// socketConn is one accepted WebSocket connection on either endpoint.
type socketConn struct {
	s              *Server
	id             int
	endpoint       Endpoint
	conversationID string
	ws             *websocket.Conn
	fault          *faultConn // under ws
	out            *outbox
	writerDone     chan struct{}

	// Guarded by Server.mu.
	conv   *conversation // set once subscribed
	live   bool          // past replay; session sockets buffer until then
	buffer []published   // session socket events held back during replay
}

// abort drops TCP at once, without a close frame.
func (sc *socketConn) abort() { _ = sc.ws.Close() }

// closeWith ends the connection with a close frame and waits for the
// client's echo (bounded by closeGrace).
func (sc *socketConn) closeWith(code int, reason string) {
	sc.out.fail(code, reason)
	for {
		if _, _, err := sc.ws.NextReader(); err != nil {
			return
		}
	}
}

// writeLoop is the connection's only data writer; every write has a deadline.
func (sc *socketConn) writeLoop() {
	defer close(sc.writerDone)
	timeout := sc.s.cfg.WriteTimeout
	for {
		f, ok := sc.out.next()
		if !ok {
			return
		}
		if f.trickle > 0 {
			if err := sc.fault.trickle(f.data, f.trickle); err != nil {
				sc.abort()
				return
			}
			continue
		}
		if f.isClose {
			msg := websocket.FormatCloseMessage(f.closeCode, f.closeReason)
			if err := sc.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(timeout)); err != nil {
				sc.abort()
				return
			}
			// The reader ends on the client's echo or on this deadline.
			_ = sc.ws.NetConn().SetReadDeadline(time.Now().Add(closeGrace))
			return
		}
		_ = sc.ws.SetWriteDeadline(time.Now().Add(timeout))
		if err := sc.ws.WriteMessage(websocket.TextMessage, f.data); err != nil {
			sc.abort()
			return
		}
	}
}

// handshakeAuth applies the pre-accept half of _accept_authenticated_websocket:
// it returns whether first-message auth is still needed, and false in ok when
// a query or header key does not match (the handshake is then rejected).
func (s *Server) handshakeAuth(r *http.Request) (needFirstFrame, ok bool) {
	if len(s.cfg.SessionAPIKeys) == 0 {
		return false, true
	}
	var key string
	switch q := r.URL.Query(); {
	case q.Has("session_api_key"): // the query wins over the header
		key = q.Get("session_api_key")
	case len(r.Header.Values("X-Session-API-Key")) > 0:
		key = r.Header.Get("X-Session-API-Key")
	default:
		return true, true
	}
	return false, slices.Contains(s.cfg.SessionAPIKeys, key)
}

// rejectHandshake answers the upgrade with 403, which is what closing a
// socket before accept() produces.
func rejectHandshake(w http.ResponseWriter) {
	w.WriteHeader(http.StatusForbidden)
}

// acceptSocket upgrades the connection and starts its writer. It returns nil
// when the server is stopping or the upgrade failed (already answered).
func (s *Server) acceptSocket(w http.ResponseWriter, r *http.Request, endpoint Endpoint, conversationID string) *socketConn {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return nil
	}
	s.connWG.Add(1)
	s.nextConnID++
	id := s.nextConnID
	s.mu.Unlock()

	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.connWG.Done()
		return nil
	}
	ws.SetReadLimit(maxInboundFrame)
	fault, _ := ws.NetConn().(*faultConn) // every accepted connection is one
	sc := &socketConn{
		fault:          fault,
		s:              s,
		id:             id,
		endpoint:       endpoint,
		conversationID: conversationID,
		ws:             ws,
		out:            newOutbox(s.cfg.MaxQueuedFrames, s.cfg.MaxQueuedBytes),
		writerDone:     make(chan struct{}),
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		_ = ws.Close()
		s.connWG.Done()
		return nil
	}
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	go sc.writeLoop()
	return sc
}

// finishSocket unsubscribes, lets a queued close frame go out, and releases
// the connection.
func (s *Server) finishSocket(sc *socketConn) {
	s.mu.Lock()
	if sc.conv != nil {
		delete(sc.conv.subs, sc)
		s.notifySubsLocked()
	}
	delete(s.conns, sc)
	s.mu.Unlock()

	if sc.out.isClosing() {
		timer := time.NewTimer(s.cfg.WriteTimeout + closeGrace)
		select {
		case <-sc.writerDone:
		case <-timer.C:
		}
		timer.Stop()
	}
	sc.out.stop()
	_ = sc.ws.Close()
	<-sc.writerDone
	s.connWG.Done()
}

// firstMessageAuth waits for the {"type":"auth","session_api_key":...} frame;
// anything else, or nothing within AuthTimeout, closes with 4001.
func (s *Server) firstMessageAuth(sc *socketConn) bool {
	_ = sc.ws.SetReadDeadline(time.Now().Add(s.cfg.AuthTimeout))
	messageType, data, err := sc.ws.ReadMessage()
	if err == nil {
		s.recordFrame(sc, messageType, data)
		_ = sc.ws.SetReadDeadline(time.Time{})
	}
	if err != nil || messageType != websocket.TextMessage || !s.validAuthFrame(data) {
		sc.closeWith(4001, "Authentication failed")
		return false
	}
	return true
}

func (s *Server) validAuthFrame(data []byte) bool {
	var frame map[string]any
	if err := json.Unmarshal(data, &frame); err != nil || frame == nil || frame["type"] != "auth" {
		return false
	}
	key, ok := frame["session_api_key"].(string)
	return ok && slices.Contains(s.cfg.SessionAPIKeys, key)
}

// admitLocked applies the subscribe-time refusals: unknown conversation
// (4004), a scripted refusal or the subscriber limit (1013). It returns the
// conversation, or a close code and reason.
func (s *Server) admitLocked(sc *socketConn) (*conversation, int, string) {
	c, ok := s.conversations[sc.conversationID]
	if !ok {
		return nil, 4004, "Conversation not found"
	}
	const tooMany = "Too many connections for this conversation"
	if c.refusal.count > 0 || time.Now().Before(c.refusal.until) {
		if c.refusal.count > 0 {
			c.refusal.count--
		}
		if c.refusal.reason != "" {
			return nil, 1013, c.refusal.reason
		}
		return nil, 1013, tooMany
	}
	// +1: the server's own persisting subscriber shares the limit.
	if len(c.subs)+1 >= s.cfg.MaxSubscribers {
		return nil, 1013, tooMany
	}
	return c, 0, ""
}

// readLoop records and handles inbound frames until the connection ends.
func (s *Server) readLoop(sc *socketConn, replyError func(code, detail string)) {
	for {
		messageType, data, err := sc.ws.ReadMessage()
		if err != nil {
			return
		}
		s.recordFrame(sc, messageType, data)
		if code, detail, failed := s.handleInbound(sc, messageType, data); failed {
			replyError(code, detail)
		}
	}
}

// handleInbound treats a non-auth frame as a user Message and sends it with
// run=true, as both sockets do. It returns the exception class name and text
// the server would report.
func (s *Server) handleInbound(sc *socketConn, messageType int, data []byte) (code, detail string, failed bool) {
	if messageType != websocket.TextMessage {
		return "KeyError", "'text'", true // receive_json reads message["text"]
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "JSONDecodeError", err.Error(), true
	}
	if isAuthControl(v) {
		return "", "", false
	}
	msg, err := validateMessage(v)
	if err != nil {
		return "ValidationError", err.Error(), true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := sc.conv
	if c == nil || c.deleted {
		return "ValueError", "inactive_service", true
	}
	if _, err := s.sendMessageLocked(c, msg, true); err != nil {
		if errors.Is(err, errUserRoleOnly) {
			return "AssertionError", userRoleOnlyDetail, true
		}
		return "ValueError", err.Error(), true
	}
	return "", "", false
}

// messageError is a pydantic-style ValidationError for Message.
type messageError struct {
	loc, msg string
}

func (e *messageError) Error() string {
	if e.loc == "" {
		return "1 validation error for Message\n  " + e.msg
	}
	return "1 validation error for Message\n" + e.loc + "\n  " + e.msg
}

// validateMessage is Message.model_validate: role is required; content may
// be a list of text/image items, a bare string (wrapped) or null; unknown
// top-level keys are ignored. It returns the llm_message as the MessageEvent
// stores it.
func validateMessage(v any) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &messageError{msg: "Input should be a valid dictionary or instance of Message"}
	}
	role, ok := m["role"].(string)
	switch {
	case m["role"] == nil:
		return nil, &messageError{loc: "role", msg: "Field required"}
	case !ok || !slices.Contains([]string{"user", "system", "assistant", "tool"}, role):
		return nil, &messageError{loc: "role", msg: "Input should be 'user', 'system', 'assistant' or 'tool'"}
	}
	content, err := validateContent(m["content"])
	if err != nil {
		return nil, err
	}
	msg := map[string]any{"role": role, "content": content, "thinking_blocks": []any{}}
	for _, key := range []string{"tool_calls", "tool_call_id", "name", "reasoning_content"} {
		if val, has := m[key]; has && val != nil {
			msg[key] = val
		}
	}
	return msg, nil
}

func validateContent(v any) ([]any, error) {
	switch content := v.(type) {
	case nil:
		return []any{}, nil
	case string:
		return []any{textContent(content)}, nil
	case []any:
		out := make([]any, 0, len(content))
		for i, item := range content {
			normalized, problem := validateContentItem(item)
			if problem != "" {
				return nil, &messageError{loc: fmt.Sprintf("content.%d", i), msg: problem}
			}
			out = append(out, normalized)
		}
		return out, nil
	default:
		return nil, &messageError{loc: "content", msg: "Input should be a valid list"}
	}
}

// validateContentItem checks one TextContent or ImageContent; it returns the
// normalised item or what is wrong with it.
func validateContentItem(v any) (map[string]any, string) {
	item, ok := v.(map[string]any)
	if !ok {
		return nil, "Input should be a valid dictionary or object to extract fields from"
	}
	cachePrompt, _ := item["cache_prompt"].(bool)
	switch item["type"] {
	case "text", nil:
		text, ok := item["text"].(string)
		if !ok {
			return nil, "text: Field required"
		}
		for k := range item {
			if !slices.Contains([]string{"type", "text", "cache_prompt", "meta", "enable_truncation"}, k) {
				return nil, k + ": Extra inputs are not permitted"
			}
		}
		out := textContent(text)
		out["cache_prompt"] = cachePrompt
		return out, ""
	case "image":
		urls, ok := item["image_urls"].([]any)
		if !ok {
			return nil, "image_urls: Field required"
		}
		return map[string]any{"type": "image", "image_urls": urls, "cache_prompt": cachePrompt}, ""
	default:
		return nil, "Input tag does not match any of the expected tags: 'text', 'image'"
	}
}
