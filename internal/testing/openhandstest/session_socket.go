package openhandstest

import (
	"fmt"
	"net/http"
	"strconv"
)

// handleSessionSocket serves GET /sockets/session/{conversation_id}: auth,
// buffered subscribe, `sync`, durable replay from after_seq, then the
// buffered events (deduplicated against the replay) and live traffic.
func (s *Server) handleSessionSocket(w http.ResponseWriter, r *http.Request) {
	conversationID, okID := parseUUID(r.PathValue("conversation_id"))
	afterSeq, okAfter := parseAfterSeq(r)
	needFirstFrame, authorized := s.handshakeAuth(r)
	if !okID || !okAfter || !authorized {
		rejectHandshake(w)
		return
	}
	sc := s.acceptSocket(w, r, EndpointSession, conversationID)
	if sc == nil {
		return
	}
	defer s.finishSocket(sc)
	if needFirstFrame && !s.firstMessageAuth(sc) {
		return
	}
	throughSeq, ok := s.subscribeSession(sc, afterSeq)
	if !ok {
		return
	}
	replayed := false
	if afterSeq != nil && throughSeq >= 0 {
		if !s.replayDurable(sc, max(*afterSeq+1, 0), throughSeq) {
			sc.closeWith(1000, "")
			return
		}
		replayed = true
	}
	s.goLive(sc, throughSeq, replayed)
	s.readLoop(sc, func(code, detail string) {
		if frame, err := marshalJSON(map[string]any{"type": "error", "code": code, "detail": detail}); err == nil {
			_ = sc.out.offer(frame)
		}
	})
}

func parseAfterSeq(r *http.Request) (*int, bool) {
	q := r.URL.Query()
	if !q.Has("after_seq") {
		return nil, true
	}
	n, err := strconv.Atoi(q.Get("after_seq"))
	if err != nil {
		return nil, false
	}
	return &n, true
}

// subscribeSession registers the socket in buffering mode (the connect-time
// full_state lands in the buffer, as subscribe_to_events pushes it), reads
// the mark and queues the `sync` frame. throughSeq is -1 for an empty log.
func (s *Server) subscribeSession(sc *socketConn, afterSeq *int) (int, bool) {
	s.mu.Lock()
	c, code, reason := s.admitLocked(sc)
	if c == nil {
		s.mu.Unlock()
		sc.closeWith(code, reason)
		return 0, false
	}
	snapshot, err := s.fullStateLocked(c)
	if err != nil {
		s.mu.Unlock()
		sc.closeWith(1011, "subscribe_failed")
		return 0, false
	}
	sc.conv = c
	sc.buffer = []published{snapshot}
	c.subs[sc] = struct{}{}
	throughSeq := len(c.log) - 1
	sync := map[string]any{"type": "sync"}
	if afterSeq != nil {
		sync["from_seq"] = *afterSeq
	}
	if throughSeq >= 0 {
		sync["through_seq"] = throughSeq
	}
	frame, err := marshalJSON(sync)
	if err == nil {
		err = sc.out.offer(frame)
	}
	s.notifySubsLocked()
	s.mu.Unlock()
	if err != nil {
		sc.closeWith(1011, "subscribe_failed")
		return 0, false
	}
	return throughSeq, true
}

// replayDurable sends seq start..through from the log as durable frames, a
// page at a time.
func (s *Server) replayDurable(sc *socketConn, start, through int) bool {
	for pageStart := start; pageStart <= through; pageStart += maxPageSize {
		pageStop := min(pageStart+maxPageSize, through+1)
		s.mu.Lock()
		page := make([][]byte, 0, pageStop-pageStart)
		for seq := pageStart; seq < pageStop; seq++ {
			page = append(page, durableFrame(seq, sc.conv.log[seq].raw))
		}
		s.mu.Unlock()
		for _, frame := range page {
			if len(frame) > s.cfg.MaxFrameBytes {
				sc.out.fail(1013, "frame_too_large")
				return false
			}
			if sc.out.put(frame) != nil {
				return false
			}
		}
	}
	return true
}

// goLive flushes the buffer, dropping what the replay already sent, and
// switches the socket to pass-through.
func (s *Server) goLive(sc *socketConn, throughSeq int, replayed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buffered := sc.buffer
	sc.buffer = nil
	sc.live = true
	for _, pub := range buffered {
		if seq, persisted := sc.conv.index[pub.id]; persisted && replayed && seq <= throughSeq {
			continue
		}
		s.emitSessionLocked(sc.conv, sc, pub)
	}
	s.notifySubsLocked()
}

// emitSessionLocked wraps an event as `durable` when the log knows its id
// (by lookup, never by type) and as `transient` otherwise.
func (s *Server) emitSessionLocked(c *conversation, sc *socketConn, pub published) {
	var frame []byte
	if seq, persisted := c.index[pub.id]; persisted {
		frame = durableFrame(seq, pub.raw)
	} else {
		frame = envelope(`{"type":"transient","event":`, pub.raw)
	}
	if len(frame) > s.cfg.MaxFrameBytes {
		sc.out.fail(1013, "frame_too_large")
		return
	}
	_ = sc.out.offer(frame) // overflow already failed the connection
}

func durableFrame(seq int, raw []byte) []byte {
	return envelope(`{"type":"durable","seq":`+strconv.Itoa(seq)+`,"event":`, raw)
}

func envelope(head string, raw []byte) []byte {
	frame := make([]byte, 0, len(head)+len(raw)+1)
	frame = append(frame, head...)
	frame = append(frame, raw...)
	return append(frame, '}')
}

// ItemStarted is the session socket's `item_started` progress frame.
type ItemStarted struct {
	ItemID    string
	Attempt   int  // default 1
	AnchorSeq *int // nil = omitted
}

// Delta is the session socket's `delta` progress frame.
type Delta struct {
	ItemID      string
	Attempt     int // default 1
	Order       int
	Kind        string // "text" (default) or "reasoning"
	Content     string
	ChunkID     string // "" = omitted
	ChoiceIndex *int   // nil = omitted
}

// ItemAborted is the session socket's `item_aborted` progress frame.
type ItemAborted struct {
	ItemID  string
	Attempt int    // default 1
	Reason  string // "no_durable_event", "cancelled" or an exception class name
}

// StartItem sends an item_started frame to the conversation's session
// sockets. Progress frames are never buffered, persisted or replayed.
func (c *Conversation) StartItem(f ItemStarted) error {
	frame := map[string]any{"type": "item_started", "item_id": f.ItemID, "attempt": attemptOrDefault(f.Attempt)}
	if f.AnchorSeq != nil {
		frame["anchor_seq"] = *f.AnchorSeq
	}
	return c.sendProgress(frame)
}

// SendDelta sends a delta frame to the conversation's session sockets.
func (c *Conversation) SendDelta(f Delta) error {
	kind := f.Kind
	if kind == "" {
		kind = "text"
	}
	frame := map[string]any{
		"type": "delta", "item_id": f.ItemID, "attempt": attemptOrDefault(f.Attempt),
		"order": f.Order, "kind": kind, "content": f.Content,
	}
	if f.ChunkID != "" {
		frame["chunk_id"] = f.ChunkID
	}
	if f.ChoiceIndex != nil {
		frame["choice_index"] = *f.ChoiceIndex
	}
	return c.sendProgress(frame)
}

// AbortItem sends an item_aborted frame to the conversation's session sockets.
func (c *Conversation) AbortItem(f ItemAborted) error {
	return c.sendProgress(map[string]any{
		"type": "item_aborted", "item_id": f.ItemID, "attempt": attemptOrDefault(f.Attempt), "reason": f.Reason,
	})
}

func attemptOrDefault(attempt int) int {
	if attempt <= 0 {
		return 1
	}
	return attempt
}

func (c *Conversation) sendProgress(frame map[string]any) error {
	raw, err := marshalJSON(frame)
	if err != nil {
		return fmt.Errorf("send %v frame: %w", frame["type"], err)
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.c.deleted {
		return ErrConversationDeleted
	}
	for sc := range c.c.subs {
		if sc.endpoint == EndpointSession {
			_ = sc.out.offer(raw)
		}
	}
	return nil
}

// StreamAgentMessage plays one streamed LLM reply the way both transports
// see it: legacy sockets get a StreamingDeltaEvent per chunk, session
// sockets an item_started, one delta per chunk, and the item is retired by
// the durable agent MessageEvent whose id is the item id. It returns that
// MessageEvent. A server with the session socket (1.58.2, as recorded)
// sends the legacy StreamingDeltaEvents with content "": the text rides
// only in the session socket's delta frames. An older server
// (WithoutSessionSocket) streams the text on the legacy socket.
func (c *Conversation) StreamAgentMessage(chunks ...string) (Event, error) {
	itemID := NewUUID()
	c.s.mu.Lock()
	anchor := len(c.c.log) - 1
	c.s.mu.Unlock()
	var anchorSeq *int
	if anchor >= 0 {
		anchorSeq = &anchor
	}
	if err := c.StartItem(ItemStarted{ItemID: itemID, AnchorSeq: anchorSeq}); err != nil {
		return nil, err
	}
	text := ""
	for order, chunk := range chunks {
		text += chunk
		legacy := ""
		if c.s.cfg.WithoutSessionSocket {
			legacy = chunk
		}
		if _, err := c.Publish(StreamingDeltaEvent(legacy)); err != nil {
			return nil, err
		}
		if err := c.SendDelta(Delta{ItemID: itemID, Order: order, Content: chunk}); err != nil {
			return nil, err
		}
	}
	msg := MessageEvent("agent", text)
	msg["id"] = itemID
	return c.Append(msg)
}
