package openhandstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"
)

// routes builds the HTTP surface. Everything is recorded; /api/* needs the
// session key when keys are configured.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /alive", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	})
	mux.HandleFunc("GET /server_info", s.handleServerInfo)
	mux.HandleFunc("GET /{$}", s.handleServerInfo)
	mux.HandleFunc("GET /sockets/events/{conversation_id}", s.handleEventsSocket)
	if !s.cfg.WithoutSessionSocket {
		mux.HandleFunc("GET /sockets/session/{conversation_id}", s.handleSessionSocket)
	}

	api := http.NewServeMux()
	api.HandleFunc("GET /api/conversations/search", s.handleSearchConversations)
	api.HandleFunc("GET /api/conversations/count", s.handleCountConversations)
	api.HandleFunc("GET /api/conversations", s.handleBatchGetConversations)
	api.HandleFunc("GET /api/conversations/{conversation_id}", s.withConversation(notFoundBare, s.handleGetConversation))
	api.HandleFunc("POST /api/conversations", s.handleStartConversation)
	api.HandleFunc("POST /api/conversations/{conversation_id}/pause", s.withConversation(notFoundBare, s.control((*Server).pauseLocked)))
	api.HandleFunc("POST /api/conversations/{conversation_id}/interrupt", s.withConversation(notFoundBare, s.control((*Server).interruptLocked)))
	api.HandleFunc("POST /api/conversations/{conversation_id}/run", s.withConversation(notFoundBare, s.handleRun))
	api.HandleFunc("DELETE /api/conversations/{conversation_id}", s.withConversation(notFoundBare, s.handleDelete))
	api.HandleFunc("PATCH /api/conversations/{conversation_id}", s.withConversation(notFoundBare, s.handleUpdate))
	api.HandleFunc("POST /api/conversations/{conversation_id}/children", s.withConversation(notFoundDetail("Parent conversation not found"), s.handleStartChild))
	api.HandleFunc("POST /api/conversations/{conversation_id}/fork", s.withConversation(notFoundDetail("Source conversation not found"), s.handleFork))
	api.HandleFunc("GET /api/conversations/{conversation_id}/events/search", s.withConversation(notFoundNamed, s.handleSearchEvents))
	api.HandleFunc("GET /api/conversations/{conversation_id}/events/count", s.withConversation(notFoundNamed, s.handleCountEvents))
	api.HandleFunc("GET /api/conversations/{conversation_id}/events/{event_id}", s.withConversation(notFoundNamed, s.handleGetEvent))
	api.HandleFunc("POST /api/conversations/{conversation_id}/events", s.withConversation(notFoundNamed, s.handleSendMessage))
	api.HandleFunc("POST /api/conversations/{conversation_id}/events/respond_to_confirmation",
		s.withConversation(notFoundNamed, s.handleRespondToConfirmation))
	api.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { writeDetail(w, http.StatusNotFound, "Not Found") })
	mux.Handle("/api/", s.requireKey(s.faultyWrites(api)))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { writeDetail(w, http.StatusNotFound, "Not Found") })
	return s.recordRequests(mux)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := marshalJSON(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"detail":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeDetail(w http.ResponseWriter, status int, detail any) {
	writeJSON(w, status, map[string]any{"detail": detail})
}

// writeValidationError answers 422 the way FastAPI reports a bad parameter.
func writeValidationError(w http.ResponseWriter, loc []any, typ, msg string, input any) {
	writeDetail(w, http.StatusUnprocessableEntity, []any{map[string]any{
		"type": typ, "loc": loc, "msg": msg, "input": input,
	}})
}

// writeServerError answers like the server's unhandled-exception handler.
func writeServerError(w http.ResponseWriter, exception string) {
	writeJSON(w, http.StatusInternalServerError, map[string]any{
		"detail": "Internal Server Error", "exception": exception, "error_id": strings.ReplaceAll(NewUUID(), "-", ""),
	})
}

func (s *Server) requireKey(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.SessionAPIKeys) > 0 && !slices.Contains(s.cfg.SessionAPIKeys, r.Header.Get("X-Session-API-Key")) {
			writeDetail(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) handleServerInfo(w http.ResponseWriter, _ *http.Request) {
	uptime := s.cfg.Clock().Sub(s.started).Seconds()
	writeJSON(w, http.StatusOK, map[string]any{
		"uptime": uptime, "idle_time": 0.0, "title": "OpenHands Agent Server",
		"version": s.cfg.Version, "sdk_version": s.cfg.Version, "tools_version": s.cfg.Version,
		"usable_tools": []any{"terminal", "file_editor", "task_tracker"}, "capabilities": []any{},
	})
}

// notFound renders the answer for an unknown conversation id; routes differ.
type notFound func(w http.ResponseWriter, id string)

func notFoundBare(w http.ResponseWriter, _ string) { writeDetail(w, http.StatusNotFound, "Not Found") }

func notFoundNamed(w http.ResponseWriter, id string) {
	writeDetail(w, http.StatusNotFound, "Conversation not found: "+id)
}

// faultyWrites applies the WriteFault to every write.
func (s *Server) faultyWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		s.mu.Lock()
		f := s.writeFault
		s.mu.Unlock()
		if !hold(r, f.Delay) {
			return
		}
		switch {
		case f.Status == http.StatusInternalServerError:
			writeServerError(w, f.Detail)
		case f.Status != 0:
			writeDetail(w, f.Status, f.Detail)
		case f.AnswerDelay > 0:
			answer := httptest.NewRecorder()
			h.ServeHTTP(answer, r)
			if !hold(r, f.AnswerDelay) {
				return
			}
			maps.Copy(w.Header(), answer.Header())
			w.WriteHeader(answer.Code)
			_, _ = w.Write(answer.Body.Bytes())
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// hold holds request r for d; false when its client gave up first.
func hold(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// withConversation parses the UUID path parameter (422 if malformed) and
// resolves the conversation (missing answered by missing).
func (s *Server) withConversation(missing notFound, h func(http.ResponseWriter, *http.Request, *conversation)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw := r.PathValue("conversation_id")
		id, ok := parseUUID(raw)
		if !ok {
			writeValidationError(w, []any{"path", "conversation_id"}, "uuid_parsing",
				"Input should be a valid UUID", raw)
			return
		}
		s.mu.Lock()
		c := s.conversations[id]
		s.mu.Unlock()
		if c == nil {
			missing(w, id)
			return
		}
		h(w, r, c)
	}
}

// parseLimit validates `limit` (1..100, default 100).
func parseLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	q := r.URL.Query()
	if !q.Has("limit") {
		return maxPageSize, true
	}
	raw := q.Get("limit")
	n, err := strconv.Atoi(raw)
	switch {
	case err != nil:
		writeValidationError(w, []any{"query", "limit"}, "int_parsing",
			"Input should be a valid integer, unable to parse string as an integer", raw)
	case n <= 0:
		writeValidationError(w, []any{"query", "limit"}, "greater_than", "Input should be greater than 0", raw)
	case n > maxPageSize:
		writeValidationError(w, []any{"query", "limit"}, "less_than_equal", "Input should be less than or equal to 100", raw)
	default:
		return n, true
	}
	return 0, false
}

// parseEnum validates an optional enum query parameter.
func parseEnum(w http.ResponseWriter, r *http.Request, name, def string, allowed ...string) (string, bool) {
	q := r.URL.Query()
	if !q.Has(name) {
		return def, true
	}
	v := q.Get(name)
	if !slices.Contains(allowed, v) {
		writeValidationError(w, []any{"query", name}, "enum", "Input should be '"+strings.Join(allowed, "', '")+"'", v)
		return "", false
	}
	return v, true
}

var statusValues = []string{
	StatusIdle, StatusRunning, StatusPaused, StatusWaitingForConfirmation,
	StatusFinished, StatusError, StatusStuck, StatusDeleting,
}

func (s *Server) handleSearchConversations(w http.ResponseWriter, r *http.Request) {
	limit, ok := parseLimit(w, r)
	if !ok {
		return
	}
	status, ok := parseEnum(w, r, "status", "", statusValues...)
	if !ok {
		return
	}
	order, ok := parseEnum(w, r, "sort_order", "CREATED_AT_DESC", "CREATED_AT", "UPDATED_AT", "CREATED_AT_DESC", "UPDATED_AT_DESC")
	if !ok {
		return
	}
	s.mu.Lock()
	fault := s.convFault
	items, next := s.searchConversationsLocked(conversationQuery{
		pageID: r.URL.Query().Get("page_id"), limit: limit, status: status, sortOrder: order,
	})
	infos := make([]any, len(items))
	for i, c := range items {
		infos[i] = s.conversationInfoLocked(c)
	}
	s.mu.Unlock()
	if fault == SearchLoop && len(items) > 0 {
		next = hexID(items[0].id)
	}
	writeSearchPage(w, fault, infos, next)
}

// writeSearchPage answers a search, or misbehaves as scripted.
func writeSearchPage(w http.ResponseWriter, fault SearchFault, items []any, next string) {
	switch fault {
	case SearchGarbage:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"items": [<<garbage>>`))
		return
	case SearchServerError:
		writeServerError(w, "scripted search failure")
		return
	}
	var nextPage any
	if next != "" {
		nextPage = next
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_page_id": nextPage})
}

func (s *Server) handleCountConversations(w http.ResponseWriter, r *http.Request) {
	status, ok := parseEnum(w, r, "status", "", statusValues...)
	if !ok {
		return
	}
	s.mu.Lock()
	n := 0
	for _, c := range s.conversations {
		if status == "" || c.status() == status {
			n++
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, n)
}

// maxBatchIDs is batch_get_conversations' max_length.
const maxBatchIDs = 99

// handleBatchGetConversations is GET /api/conversations?ids=...: the
// ConversationInfo of each id in order, null for one the server does not
// have; at least one id, at most maxBatchIDs.
func (s *Server) handleBatchGetConversations(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query()["ids"]
	switch {
	case len(raw) == 0:
		writeValidationError(w, []any{"query", "ids"}, "missing", "Field required", nil)
		return
	case len(raw) > maxBatchIDs:
		writeValidationError(w, []any{"query", "ids"}, "too_long",
			fmt.Sprintf("List should have at most %d items after validation, not %d", maxBatchIDs, len(raw)), raw)
		return
	}
	ids := make([]string, len(raw))
	for i, v := range raw {
		id, ok := parseUUID(v)
		if !ok {
			writeValidationError(w, []any{"query", "ids", i}, "uuid_parsing", "Input should be a valid UUID", v)
			return
		}
		ids[i] = id
	}
	s.mu.Lock()
	out := make([]any, len(ids))
	for i, id := range ids {
		if c := s.conversations[id]; c != nil {
			out[i] = s.conversationInfoLocked(c)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetConversation(w http.ResponseWriter, _ *http.Request, c *conversation) {
	s.mu.Lock()
	info := s.conversationInfoLocked(c)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, info)
}

// handleStartConversation is a minimal POST /api/conversations: 201 with
// ConversationInfo for a new id, 200 for an existing one; an
// initial_message is always sent with run=true.
func (s *Server) handleStartConversation(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ConversationID     string            `json:"conversation_id"`
		Agent              map[string]any    `json:"agent"`
		Workspace          map[string]any    `json:"workspace"`
		ConfirmationPolicy map[string]any    `json:"confirmation_policy"`
		Tags               map[string]string `json:"tags"`
		InitialMessage     json.RawMessage   `json:"initial_message"`
	}
	body, _ := readBody(r)
	if err := json.Unmarshal(body, &req); err != nil {
		writeValidationError(w, []any{"body"}, "json_invalid", "JSON decode error", string(body))
		return
	}
	if req.ConversationID != "" {
		if conv, ok := s.Conversation(req.ConversationID); ok {
			s.handleGetConversation(w, r, conv.c)
			return
		}
	}
	workingDir, _ := req.Workspace["working_dir"].(string)
	conv, err := s.CreateConversation(ConversationOptions{
		ID: req.ConversationID, Agent: req.Agent, WorkingDir: workingDir,
		ConfirmationPolicy: req.ConfirmationPolicy, Tags: req.Tags,
	})
	if err != nil {
		writeValidationError(w, []any{"body", "conversation_id"}, "uuid_parsing", err.Error(), req.ConversationID)
		return
	}
	if len(req.InitialMessage) > 0 && string(req.InitialMessage) != "null" {
		msg, _, ok := decodeSendMessage(w, req.InitialMessage) // always run=true
		if !ok {
			return
		}
		s.mu.Lock()
		_, err = s.sendMessageLocked(conv.c, msg, true)
		s.mu.Unlock()
		if err != nil {
			writeServerError(w, err.Error())
			return
		}
	}
	s.mu.Lock()
	info := s.conversationInfoLocked(conv.c)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, info)
}

func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// control adapts a pause/interrupt operation to a {"success":true} route.
func (s *Server) control(op func(*Server, *conversation) error) func(http.ResponseWriter, *http.Request, *conversation) {
	return func(w http.ResponseWriter, _ *http.Request, c *conversation) {
		s.mu.Lock()
		err := op(s, c)
		s.mu.Unlock()
		if errors.Is(err, ErrConversationDeleted) {
			notFoundBare(w, c.id)
			return
		}
		if err != nil {
			writeServerError(w, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"success": true})
	}
}

func (s *Server) handleRun(w http.ResponseWriter, _ *http.Request, c *conversation) {
	s.mu.Lock()
	err := s.startRunLocked(c)
	s.mu.Unlock()
	if errors.Is(err, errAlreadyRunning) {
		writeDetail(w, http.StatusConflict, "Conversation already running. Wait for completion or pause first.")
		return
	}
	writeSuccess(w, err)
}

// handleUpdate is PATCH /api/conversations/{id} (UpdateConversationRequest:
// title 1..200 characters, tags): {"success": true}.
func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request, c *conversation) {
	var req struct {
		Title *string           `json:"title"`
		Tags  map[string]string `json:"tags"`
	}
	body, _ := readBody(r)
	if err := json.Unmarshal(body, &req); err != nil {
		writeValidationError(w, []any{"body"}, "json_invalid", "JSON decode error", string(body))
		return
	}
	if req.Title != nil && len(*req.Title) < 1 {
		writeValidationError(w, []any{"body", "title"}, "string_too_short", "String should have at least 1 character", *req.Title)
		return
	}
	if req.Title != nil && len(*req.Title) > 200 {
		writeValidationError(w, []any{"body", "title"}, "string_too_long", "String should have at most 200 characters", *req.Title)
		return
	}
	s.mu.Lock()
	_, err := s.updateLocked(c, req.Title, req.Tags)
	s.mu.Unlock()
	writeSuccess(w, err)
}

func (s *Server) handleDelete(w http.ResponseWriter, _ *http.Request, c *conversation) {
	s.mu.Lock()
	deleted := !c.deleted
	if deleted {
		s.deleteLocked(c)
	}
	s.mu.Unlock()
	if !deleted {
		notFoundBare(w, c.id)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// parseEventQuery validates the events search/count filters.
func (s *Server) parseEventQuery(w http.ResponseWriter, r *http.Request, paged bool) (eventQuery, bool) {
	q := r.URL.Query()
	query := eventQuery{kind: q.Get("kind"), source: q.Get("source"), body: q.Get("body"), limit: maxPageSize}
	if paged {
		limit, ok := parseLimit(w, r)
		if !ok {
			return query, false
		}
		order, ok := parseEnum(w, r, "sort_order", "TIMESTAMP", "TIMESTAMP", "TIMESTAMP_DESC")
		if !ok {
			return query, false
		}
		query.limit, query.pageID, query.descending = limit, q.Get("page_id"), order == "TIMESTAMP_DESC"
	}
	for name, dst := range map[string]*string{"timestamp__gte": &query.timestampGTE, "timestamp__lt": &query.timestampLT} {
		if !q.Has(name) {
			continue
		}
		normalized, err := normalizeQueryTime(q.Get(name), s.cfg.Location)
		if err != nil {
			writeValidationError(w, []any{"query", name}, "datetime_from_date_parsing", "Input should be a valid datetime", q.Get(name))
			return query, false
		}
		*dst = normalized
	}
	return query, true
}

func (s *Server) handleSearchEvents(w http.ResponseWriter, r *http.Request, c *conversation) {
	query, ok := s.parseEventQuery(w, r, true)
	if !ok {
		return
	}
	s.mu.Lock()
	hook := s.onEventSearch
	s.mu.Unlock()
	if hook != nil {
		hook(c.id)
	}
	s.mu.Lock()
	fault := s.eventFault
	items, next := searchEventsLocked(c, query)
	s.mu.Unlock()
	page := make([]any, len(items))
	for i, se := range items {
		page[i] = json.RawMessage(se.wire)
	}
	if fault == SearchLoop && len(items) > 0 {
		next = items[0].event.ID()
	}
	writeSearchPage(w, fault, page, next)
}

func (s *Server) handleCountEvents(w http.ResponseWriter, r *http.Request, c *conversation) {
	query, ok := s.parseEventQuery(w, r, false)
	if !ok {
		return
	}
	s.mu.Lock()
	n := 0
	for _, se := range c.log {
		if query.matches(se.event) {
			n++
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, n)
}

func (s *Server) handleGetEvent(w http.ResponseWriter, r *http.Request, c *conversation) {
	s.mu.Lock()
	seq, ok := c.index[r.PathValue("event_id")]
	var raw []byte
	if ok {
		raw = c.log[seq].raw
	}
	s.mu.Unlock()
	if !ok {
		writeDetail(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, json.RawMessage(raw))
}

// decodeSendMessage validates a SendMessageRequest body into the
// llm_message it produces and its run flag; on failure it answers 422 itself
// and returns ok false.
func decodeSendMessage(w http.ResponseWriter, body []byte) (msg map[string]any, run, ok bool) {
	var req struct {
		Role    *string `json:"role"`
		Content []any   `json:"content"`
		Run     bool    `json:"run"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeValidationError(w, []any{"body"}, "model_attributes_type", "Input should be a valid dictionary or object", string(body))
		return nil, false, false
	}
	role := "user"
	if req.Role != nil {
		role = *req.Role
	}
	content := req.Content
	if content == nil {
		content = []any{}
	}
	msg, err := validateMessage(map[string]any{"role": role, "content": content})
	if err != nil {
		writeValidationError(w, []any{"body"}, "value_error", err.Error(), string(body))
		return nil, false, false
	}
	return msg, req.Run, true
}

func (s *Server) handleSendMessage(w http.ResponseWriter, r *http.Request, c *conversation) {
	body, _ := readBody(r)
	msg, run, ok := decodeSendMessage(w, body)
	if !ok {
		return
	}
	s.mu.Lock()
	_, err := s.sendMessageLocked(c, msg, run)
	s.mu.Unlock()
	if errors.Is(err, errUserRoleOnly) {
		writeServerError(w, userRoleOnlyDetail) // an AssertionError in the SDK
		return
	}
	writeSuccess(w, err)
}

func (s *Server) handleRespondToConfirmation(w http.ResponseWriter, r *http.Request, c *conversation) {
	body, _ := readBody(r)
	var req struct {
		Accept *bool   `json:"accept"`
		Reason *string `json:"reason"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Accept == nil {
		writeValidationError(w, []any{"body", "accept"}, "missing", "Field required", string(body))
		return
	}
	reason := "User rejected the action."
	if req.Reason != nil {
		reason = *req.Reason
	}
	s.mu.Lock()
	err := s.respondToConfirmationLocked(c, *req.Accept, reason)
	s.mu.Unlock()
	writeSuccess(w, err)
}

// writeSuccess answers a write to a conversation as the server does: its
// success body, 400 inactive_service once the conversation is deleted, or
// the unhandled-exception 500.
func writeSuccess(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrConversationDeleted):
		writeDetail(w, http.StatusBadRequest, "inactive_service")
	case err != nil:
		writeServerError(w, err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]any{"success": true})
	}
}
