package openhandstest

import (
	"net/http"
	"net/url"
)

// resendParams are the legacy socket's replay query parameters.
type resendParams struct {
	mode  string // "", "all" or "since"
	after string // normalised naive timestamp for since; "" = none given
}

// parseResendParams validates resend_mode, after_timestamp and the
// deprecated resend_all as FastAPI would; invalid values reject the handshake.
func (s *Server) parseResendParams(q url.Values) (resendParams, bool) {
	var p resendParams
	if q.Has("resend_mode") {
		p.mode = q.Get("resend_mode")
		if p.mode != "all" && p.mode != "since" {
			return p, false
		}
	}
	if q.Has("after_timestamp") {
		after, err := normalizeQueryTime(q.Get("after_timestamp"), s.cfg.Location)
		if err != nil {
			return p, false
		}
		p.after = after
	}
	if q.Has("resend_all") {
		all, err := parseBool(q.Get("resend_all"))
		if err != nil {
			return p, false
		}
		if all && p.mode == "" {
			p.mode = "all"
		}
	}
	return p, true
}

// handleEventsSocket serves GET /sockets/events/{conversation_id}: auth,
// subscribe (full_state first), replay after subscribing, then inbound
// messages until disconnect.
func (s *Server) handleEventsSocket(w http.ResponseWriter, r *http.Request) {
	conversationID, okID := parseUUID(r.PathValue("conversation_id"))
	params, okParams := s.parseResendParams(r.URL.Query())
	needFirstFrame, authorized := s.handshakeAuth(r)
	if !okID || !okParams || !authorized {
		rejectHandshake(w)
		return
	}
	sc := s.acceptSocket(w, r, EndpointEvents, conversationID)
	if sc == nil {
		return
	}
	defer s.finishSocket(sc)
	if needFirstFrame && !s.firstMessageAuth(sc) {
		return
	}
	hooks, ok := s.subscribeEvents(sc, params)
	if !ok {
		return
	}
	if !s.replayEvents(sc, params, hooks) {
		sc.closeWith(1000, "")
		return
	}
	s.mu.Lock()
	sc.live = true
	s.notifySubsLocked()
	s.mu.Unlock()
	s.readLoop(sc, func(code, detail string) {
		pub, _, err := s.stampTransient(Event{
			"kind": KindServerErrorEvent, "source": "environment", "code": code, "detail": detail,
		})
		if err == nil {
			_ = sc.out.offer(pub.wire)
		}
	})
}

// subscribeEvents registers the socket and queues the full_state snapshot as
// its first frame. It takes the replay hooks when a replay will run.
func (s *Server) subscribeEvents(sc *socketConn, params resendParams) ([]replayHook, bool) {
	s.mu.Lock()
	c, code, reason := s.admitLocked(sc)
	if c == nil {
		s.mu.Unlock()
		sc.closeWith(code, reason)
		return nil, false
	}
	snapshot, err := s.fullStateLocked(c)
	if err != nil {
		s.mu.Unlock()
		sc.closeWith(1011, "subscribe_failed")
		return nil, false
	}
	sc.conv = c
	c.subs[sc] = struct{}{}
	_ = sc.out.offer(snapshot.wire)
	var hooks []replayHook
	if params.mode == "all" || params.mode == "since" && params.after != "" {
		hooks, c.hooks = c.hooks, nil
	}
	s.notifySubsLocked()
	s.mu.Unlock()
	return hooks, true
}

// replayEvents resends history page by page, as page_iterator(search_events)
// does, while live events keep arriving on the same queue: they may
// interleave with and duplicate the replay. It returns false when the
// connection went away.
func (s *Server) replayEvents(sc *socketConn, params resendParams, hooks []replayHook) bool {
	if params.mode == "" || params.mode == "since" && params.after == "" {
		return true // `since` without after_timestamp resends nothing
	}
	sent := 0
	runHooks := func(final bool) {
		kept := hooks[:0]
		for _, h := range hooks {
			if h.after <= sent || final {
				h.fn()
			} else {
				kept = append(kept, h)
			}
		}
		hooks = kept
	}
	runHooks(false)
	query := eventQuery{limit: maxPageSize, timestampGTE: params.after}
	for {
		s.mu.Lock()
		items, next := searchEventsLocked(sc.conv, query)
		s.mu.Unlock()
		for _, se := range items {
			if sc.out.put(se.wire) != nil {
				return false
			}
			sent++
			runHooks(false)
		}
		if next == "" {
			break
		}
		query.pageID = next
	}
	runHooks(true)
	return true
}
