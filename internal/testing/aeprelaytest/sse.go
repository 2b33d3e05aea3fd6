package aeprelaytest

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// sseMessage is one item of an SSE stream's outbox.
type sseMessage struct {
	comment string // written as ": comment"
	event   string
	id      string
	data    []byte
	end     bool // end the stream after the items before it
}

// sseStream is one GET /stream consumer (AEP-0003 §3.3).
type sseStream struct {
	filter   filter
	ceiling  aep.Capture
	out      *outbox[sseMessage]
	killed   chan struct{} // closed when the consumer is too slow
	killOnce sync.Once
}

// streamParams are the SSE shorthand filter parameters, ANDed with
// `filter`; each may repeat (any-of), and type takes `p.*` patterns.
var streamParams = []string{"session", "type", "agent", "source", "run", "subject"}

// parseStreamQuery reads a subscription from the request: filter,
// capture, from or Last-Event-ID, and live.
func parseStreamQuery(req *http.Request) (filter, aep.Capture, replayRequest, bool, error) {
	q := req.URL.Query()
	members := map[string]any{}
	if raw := q.Get("filter"); raw != "" {
		v, err := aep.DecodeValue([]byte(raw))
		m, ok := v.(map[string]any)
		if err != nil || !ok {
			return filter{}, "", replayRequest{}, false, fmt.Errorf("%w: filter must be a JSON object", errInvalidFilter)
		}
		members = m
	}
	for _, name := range streamParams {
		values, ok := q[name]
		if !ok {
			continue
		}
		if _, dup := members[name]; dup {
			return filter{}, "", replayRequest{}, false, fmt.Errorf("%w: %q is both a parameter and a filter member", errInvalidFilter, name)
		}
		anyOf := make([]any, len(values))
		for i, v := range values {
			anyOf[i] = v
		}
		members[name] = anyOf
	}
	f, err := parseFilter(members)
	if err != nil {
		return filter{}, "", replayRequest{}, false, err
	}
	ceiling := aep.Capture(q.Get("capture"))
	if ceiling != "" && ceiling.Rank() < 0 {
		return filter{}, "", replayRequest{}, false, fmt.Errorf("%w: capture must be none, metadata, redacted or full", errInvalidFilter)
	}
	var replay replayRequest
	switch from, lastID := q.Get("from"), req.Header.Get("Last-Event-ID"); {
	case from == "all": // the literal, unquoted in a query (AEP-0003 §3.3)
		replay.all = true
	case from != "":
		if replay, err = parseFrom([]byte(from)); err != nil {
			return filter{}, "", replayRequest{}, false, fmt.Errorf("%w: %v", errInvalidFilter, err)
		}
	case lastID != "":
		session, p, err := parseToken(lastID)
		if err != nil {
			return filter{}, "", replayRequest{}, false, fmt.Errorf("%w: Last-Event-ID: %v", errInvalidFilter, err)
		}
		replay.points = []resumePoint{{session: session, after: p}}
	}
	live := q.Get("live") != "0" && q.Get("live") != "false"
	return f, ceiling, replay, live, nil
}

func (r *Relay) handleStream(w http.ResponseWriter, req *http.Request) {
	f, ceiling, replay, live, err := parseStreamQuery(req)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid-filter", "detail": err.Error()})
		return
	}
	if len(replay.points) > r.cfg.MaxFrom {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"error": "limit-exceeded", "detail": fmt.Sprintf("%d resume positions exceed MaxFrom %d", len(replay.points), r.cfg.MaxFrom),
		})
		return
	}
	s := &sseStream{filter: f, ceiling: ceiling, out: newOutbox[sseMessage](r.cfg.MaxQueued), killed: make(chan struct{})}
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "unavailable", "detail": "relay is stopping"})
		return
	}
	s.replayLocked(r, replay)
	if live {
		r.streams[s] = struct{}{}
	} else {
		s.out.push(sseMessage{end: true}, false)
	}
	r.notifyLocked()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.streams, s)
		r.notifyLocked()
		r.mu.Unlock()
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := s.flush(rc, r.cfg.WriteTimeout); err != nil {
		return
	}
	heartbeat := time.NewTicker(r.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-s.killed:
			return
		case <-heartbeat.C:
			if s.write(w, rc, r.cfg.WriteTimeout, sseMessage{comment: "ping"}) != nil || s.flush(rc, r.cfg.WriteTimeout) != nil {
				return
			}
		case <-s.out.ready:
			// What is queued goes out with one flush.
			for _, m := range s.out.take() {
				if m.end {
					_ = s.flush(rc, r.cfg.WriteTimeout)
					return
				}
				if err := s.write(w, rc, r.cfg.WriteTimeout, m); err != nil {
					return
				}
			}
			if err := s.flush(rc, r.cfg.WriteTimeout); err != nil {
				return
			}
		}
	}
}

// replayLocked queues the replay (AEP-0003 §3.3 rule 3, §5).
func (s *sseStream) replayLocked(r *Relay, req replayRequest) {
	for _, part := range r.replayLocked(req) {
		if part.exhausted {
			comment := "replay-exhausted " + part.key.session
			if part.hasEarliest {
				comment += fmt.Sprintf(" %d:%d", part.earliest.epoch, part.earliest.seq)
			}
			s.out.push(sseMessage{comment: comment}, false)
		}
		for _, e := range part.entries {
			if m, ok := s.message(e, &renderCache{in: e, r: r}); ok {
				s.out.push(m, false)
			}
		}
	}
}

// message renders a matching Event as an SSE message: event = type, id =
// its position token for a positioned Event.
func (s *sseStream) message(in *ingested, rc *renderCache) (sseMessage, bool) {
	if !s.filter.match(in.ev) {
		return sseMessage{}, false
	}
	data, ok := rc.bytes(s.ceiling)
	if !ok {
		return sseMessage{}, false
	}
	m := sseMessage{event: in.ev.Type, data: data}
	if in.positioned && !strings.ContainsAny(in.ev.Session, "\r\n") {
		m.id = token(in.ev.Session, in.pos)
	}
	return m, true
}

func (s *sseStream) deliverLocked(in *ingested, rc *renderCache) {
	m, ok := s.message(in, rc)
	if !ok {
		return
	}
	if !s.out.push(m, true) {
		// Too slow: end the stream so that the consumer resumes exactly
		// (AEP-0003 §8.4).
		s.killOnce.Do(func() { close(s.killed) })
	}
}

// shutdownLocked ends the stream in order: `: shutting-down`, then the end.
func (s *sseStream) shutdownLocked() {
	s.out.push(sseMessage{comment: "shutting-down"}, false)
	s.out.push(sseMessage{end: true}, false)
	s.out.close()
}

func (s *sseStream) write(w http.ResponseWriter, rc *http.ResponseController, timeout time.Duration, m sseMessage) error {
	var b strings.Builder
	if m.comment != "" {
		b.WriteString(": " + m.comment + "\n\n")
	} else {
		b.WriteString("event: " + m.event + "\n")
		if m.id != "" {
			b.WriteString("id: " + m.id + "\n")
		}
		b.WriteString("data: ")
		b.Write(m.data)
		b.WriteString("\n\n")
	}
	if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("set SSE write deadline: %w", err)
	}
	if _, err := w.Write([]byte(b.String())); err != nil {
		return fmt.Errorf("write SSE message: %w", err)
	}
	return nil
}

func (s *sseStream) flush(rc *http.ResponseController, timeout time.Duration) error {
	if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("set SSE write deadline: %w", err)
	}
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush SSE stream: %w", err)
	}
	return nil
}
