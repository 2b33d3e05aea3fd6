package openhandstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Execution statuses (ConversationExecutionStatus).
const (
	StatusIdle                   = "idle"
	StatusRunning                = "running"
	StatusPaused                 = "paused"
	StatusWaitingForConfirmation = "waiting_for_confirmation"
	StatusFinished               = "finished"
	StatusError                  = "error"
	StatusStuck                  = "stuck"
	StatusDeleting               = "deleting"
)

var knownStatuses = map[string]bool{
	StatusIdle: true, StatusRunning: true, StatusPaused: true, StatusWaitingForConfirmation: true,
	StatusFinished: true, StatusError: true, StatusStuck: true, StatusDeleting: true,
}

// fullStateKey marks a ConversationStateUpdateEvent carrying the whole state.
const fullStateKey = "full_state"

var errAlreadyRunning = errors.New("conversation_already_running")

// storedEvent is one persisted event with its two renderings.
type storedEvent struct {
	event Event  // decoded persisted form; never mutated
	raw   []byte // persisted form (what disk and the session socket carry)
	wire  []byte // legacy transport form
}

// published is one event on its way to subscribers.
type published struct {
	id   string
	kind string
	raw  []byte
	wire []byte
}

// conversation is one conversation's server-side state, guarded by Server.mu.
type conversation struct {
	id        string
	created   int // creation order, the tie-break of the search sort
	title     any // string or nil
	createdAt time.Time
	updatedAt time.Time
	state     map[string]any // ConversationState fields
	log       []storedEvent
	index     map[string]int // event id -> seq
	leafID    string         // conversation HEAD: last persisted event that is not a state update
	subs      map[*socketConn]struct{}
	deleted   bool
	run       *activeRun
	refusal   refusal
	hooks     []replayHook
	// The conversation tree (tree.go): the parent that started this one,
	// the conversation and event it was forked from.
	parentID, forkedFrom, forkedAt string
	webhooks                       []*webhookSubscriber
}

type activeRun struct {
	cancel context.CancelFunc
}

// refusal makes the next connections fail with 1013.
type refusal struct {
	count  int
	until  time.Time
	reason string
}

// replayHook runs fn once the next legacy replay has queued `after` frames.
type replayHook struct {
	after int
	fn    func()
}

func (c *conversation) status() string {
	s, _ := c.state["execution_status"].(string)
	return s
}

// appendLocked is the one place events are persisted: it stamps what the
// server would stamp, appends to the log (the seq is the log index), applies
// per-field state updates, and publishes. StreamingDeltaEvents and full_state
// snapshots are published but never persisted, as on the real server.
func (s *Server) appendLocked(c *conversation, ev Event) (Event, error) {
	if c.deleted {
		return nil, ErrConversationDeleted
	}
	if isTransient(ev) {
		pub, out, err := s.stampTransient(ev)
		if err != nil {
			return nil, err
		}
		s.publishLocked(c, pub)
		return out, nil
	}
	stamped := s.stamp(ev)
	if _, has := stamped["parent_id"]; !has && c.leafID != "" {
		stamped["parent_id"] = c.leafID
	}
	raw, err := marshalJSON(stamped)
	if err != nil {
		return nil, fmt.Errorf("append event to %s: %w", c.id, err)
	}
	return s.persistLocked(c, raw)
}

// persistLocked appends an already-serialized event verbatim.
func (s *Server) persistLocked(c *conversation, raw []byte) (Event, error) {
	if c.deleted {
		return nil, ErrConversationDeleted
	}
	ev, err := decodeEvent(raw)
	if err != nil {
		return nil, fmt.Errorf("append event to %s: %w", c.id, err)
	}
	id := ev.ID()
	if id == "" {
		return nil, fmt.Errorf("append event to %s: event has no string id", c.id)
	}
	if _, dup := c.index[id]; dup {
		return nil, fmt.Errorf("append event to %s: duplicate event id %s", c.id, id)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("append event to %s: %w", c.id, err)
	}
	se := storedEvent{event: ev, raw: compact.Bytes(), wire: compact.Bytes()}
	if s.cfg.LegacyTransportDump {
		if se.wire, err = marshalJSON(stripForTransport(ev)); err != nil {
			return nil, fmt.Errorf("append event to %s: %w", c.id, err)
		}
	}
	c.index[id] = len(c.log)
	c.log = append(c.log, se)
	// As the server's _EventSubscriber: any event but a state update is
	// activity and moves updated_at; a status change alone does not.
	if ev.Kind() == KindConversationStateUpdateEvent {
		if key, _ := ev["key"].(string); key != fullStateKey {
			c.state[key] = ev["value"]
		}
	} else {
		c.updatedAt = s.cfg.Clock()
		c.leafID = id
	}
	s.publishLocked(c, published{id: id, kind: ev.Kind(), raw: se.raw, wire: se.wire})
	return decodeEvent(se.raw)
}

func isTransient(ev Event) bool {
	if ev.Kind() == KindStreamingDeltaEvent {
		return true
	}
	key, _ := ev["key"].(string)
	return ev.Kind() == KindConversationStateUpdateEvent && key == fullStateKey
}

// stamp copies ev, giving it an id and a timestamp if it has none.
func (s *Server) stamp(ev Event) Event {
	stamped := make(Event, len(ev)+3)
	for k, v := range ev {
		stamped[k] = v
	}
	if stamped.ID() == "" {
		stamped["id"] = NewUUID()
	}
	if stamped.Timestamp() == "" {
		stamped["timestamp"] = FormatTimestamp(s.now())
	}
	return stamped
}

// stampTransient gives an unpersisted event an id and timestamp if missing;
// such events bypass the conversation callback, so they get no parent_id.
func (s *Server) stampTransient(ev Event) (published, Event, error) {
	stamped := s.stamp(ev)
	raw, err := marshalJSON(stamped)
	if err != nil {
		return published{}, nil, fmt.Errorf("publish event: %w", err)
	}
	out, err := decodeEvent(raw)
	if err != nil {
		return published{}, nil, fmt.Errorf("publish event: %w", err)
	}
	wire := raw
	if s.cfg.LegacyTransportDump {
		if wire, err = marshalJSON(stripForTransport(out)); err != nil {
			return published{}, nil, fmt.Errorf("publish event: %w", err)
		}
	}
	pub := published{id: out.ID(), kind: out.Kind(), raw: raw, wire: wire}
	copied, err := decodeEvent(raw)
	return pub, copied, err
}

// publishLocked fans an event out to every subscriber of c without blocking.
func (s *Server) publishLocked(c *conversation, pub published) {
	for _, w := range c.webhooks {
		w.enqueue(pub.raw) // model_dump: parent_id kept
	}
	for sc := range c.subs {
		switch sc.endpoint {
		case EndpointEvents:
			_ = sc.out.offer(pub.wire) // overflow already failed the connection
		case EndpointSession:
			if pub.kind == KindStreamingDeltaEvent {
				continue // token progress travels as item_started/delta frames
			}
			if !sc.live {
				sc.buffer = append(sc.buffer, pub)
				continue
			}
			s.emitSessionLocked(c, sc, pub)
		}
	}
}

// setStateLocked assigns one ConversationState field; like pydantic's
// __setattr__ hook it emits (and persists) a state update only on change.
func (s *Server) setStateLocked(c *conversation, key string, value any) (Event, error) {
	if c.deleted {
		return nil, ErrConversationDeleted
	}
	if old, has := c.state[key]; has && jsonEqual(old, value) {
		return nil, nil
	}
	return s.appendLocked(c, StateUpdateEvent(key, value))
}

func (s *Server) setStatusLocked(c *conversation, status string) (Event, error) {
	return s.setStateLocked(c, "execution_status", status)
}

// fullStateLocked builds a fresh full_state snapshot (new id each time).
func (s *Server) fullStateLocked(c *conversation) (published, error) {
	value := make(map[string]any, len(c.state)+4)
	for k, v := range c.state {
		if v != nil { // exclude_none
			value[k] = v
		}
	}
	value["id"] = c.id
	value["head_is_empty"] = len(c.log) == 0
	if c.leafID != "" {
		value["leaf_event_id"] = c.leafID
	}
	pub, _, err := s.stampTransient(Event{
		"kind": KindConversationStateUpdateEvent, "source": "environment",
		"key": fullStateKey, "value": value,
	})
	return pub, err
}

func (s *Server) publishFullStateLocked(c *conversation) error {
	pub, err := s.fullStateLocked(c)
	if err != nil {
		return err
	}
	s.publishLocked(c, pub)
	return nil
}

// sendMessageLocked is send_message(message, run): append the user
// MessageEvent (terminal finished/stuck reset to idle first) and the
// last_user_message_id update, then optionally start a run.
func (s *Server) sendMessageLocked(c *conversation, llmMessage map[string]any, run bool) (Event, error) {
	if c.deleted {
		return nil, ErrConversationDeleted
	}
	if llmMessage["role"] != "user" {
		return nil, errUserRoleOnly
	}
	if st := c.status(); st == StatusFinished || st == StatusStuck {
		if _, err := s.setStatusLocked(c, StatusIdle); err != nil {
			return nil, err
		}
	}
	msg, err := s.appendLocked(c, Event{
		"kind": KindMessageEvent, "source": "user", "llm_message": llmMessage,
		"activated_skills": []any{}, "extended_content": []any{},
	})
	if err != nil {
		return nil, err
	}
	if _, err := s.setStateLocked(c, "last_user_message_id", msg.ID()); err != nil {
		return nil, err
	}
	if run {
		// A run already in progress picks the message up itself.
		if err := s.startRunLocked(c); err != nil && !errors.Is(err, errAlreadyRunning) {
			return nil, err
		}
	}
	return msg, nil
}

var errUserRoleOnly = errors.New("only user messages are allowed")

// userRoleOnlyDetail is the SDK's AssertionError text for errUserRoleOnly.
const userRoleOnlyDetail = "Only user messages are allowed to be sent to the agent."

// startRunLocked is EventService.run(): refused while running; a finished
// conversation's run loop exits at once (only the end-of-run snapshot);
// otherwise the status becomes running and OnRun, if any, plays the agent.
func (s *Server) startRunLocked(c *conversation) error {
	if c.deleted {
		return ErrConversationDeleted
	}
	switch c.status() {
	case StatusRunning:
		return errAlreadyRunning
	case StatusFinished:
		return s.publishFullStateLocked(c)
	}
	if _, err := s.setStatusLocked(c, StatusRunning); err != nil {
		return err
	}
	s.cancelRunLocked(c)
	if s.cfg.OnRun == nil || s.stopping {
		c.run = &activeRun{cancel: func() {}}
		return nil
	}
	ctx, cancel := context.WithCancel(s.runCtx)
	r := &activeRun{cancel: cancel}
	c.run = r
	s.runWG.Add(1)
	go func() {
		defer s.runWG.Done()
		defer cancel()
		s.cfg.OnRun(ctx, &Conversation{s: s, c: c})
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if c.run != r || c.deleted {
			return
		}
		c.run = nil
		if c.status() == StatusRunning {
			_, _ = s.setStatusLocked(c, StatusFinished)
		}
		_ = s.publishFullStateLocked(c)
	}()
	return nil
}

func (s *Server) cancelRunLocked(c *conversation) {
	if c.run != nil {
		c.run.cancel()
		c.run = nil
	}
}

// finishRunLocked ends the current run with status and publishes the
// end-of-run full_state snapshot.
func (s *Server) finishRunLocked(c *conversation, status string) error {
	if c.deleted {
		return ErrConversationDeleted
	}
	s.cancelRunLocked(c)
	if _, err := s.setStatusLocked(c, status); err != nil {
		return err
	}
	return s.publishFullStateLocked(c)
}

// pauseLocked is EventService.pause(): only idle or running become paused
// (with a PauseEvent); a full_state snapshot follows in every case.
func (s *Server) pauseLocked(c *conversation) error {
	if c.deleted {
		return ErrConversationDeleted
	}
	if st := c.status(); st == StatusIdle || st == StatusRunning {
		s.cancelRunLocked(c)
		if _, err := s.setStatusLocked(c, StatusPaused); err != nil {
			return err
		}
		if _, err := s.appendLocked(c, PauseEvent()); err != nil {
			return err
		}
	}
	s.postInfoLocked(c, "")
	return s.publishFullStateLocked(c)
}

// interruptLocked is EventService.interrupt(): a running conversation gets
// an AgentErrorEvent per orphaned action, becomes paused and emits an
// InterruptEvent; otherwise it falls back to pause. A snapshot follows.
func (s *Server) interruptLocked(c *conversation) error {
	if c.deleted {
		return ErrConversationDeleted
	}
	if c.status() != StatusRunning {
		return s.pauseLocked(c)
	}
	s.cancelRunLocked(c)
	for _, action := range unmatchedActions(c.log) {
		if _, err := s.appendLocked(c, AgentErrorEvent(action,
			"Tool call interrupted before completion. The conversation was paused.", AgentOutcome)); err != nil {
			return err
		}
	}
	if _, err := s.setStatusLocked(c, StatusPaused); err != nil {
		return err
	}
	if _, err := s.appendLocked(c, InterruptEvent()); err != nil {
		return err
	}
	s.postInfoLocked(c, "")
	return s.publishFullStateLocked(c)
}

// rejectPendingLocked is reject_pending_actions(reason): leave
// waiting_for_confirmation for idle, then reject every unmatched action. It
// does not run the agent.
func (s *Server) rejectPendingLocked(c *conversation, reason string) error {
	if c.deleted {
		return ErrConversationDeleted
	}
	pending := unmatchedActions(c.log)
	if c.status() == StatusWaitingForConfirmation {
		if _, err := s.setStatusLocked(c, StatusIdle); err != nil {
			return err
		}
	}
	for _, action := range pending {
		if _, err := s.appendLocked(c, UserRejectObservation(action, reason)); err != nil {
			return err
		}
	}
	return nil
}

// respondToConfirmationLocked: accept runs (already running is success),
// reject rejects the pending actions.
func (s *Server) respondToConfirmationLocked(c *conversation, accept bool, reason string) error {
	if !accept {
		return s.rejectPendingLocked(c, reason)
	}
	if err := s.startRunLocked(c); err != nil && !errors.Is(err, errAlreadyRunning) {
		return err
	}
	return nil
}

func (s *Server) deleteLocked(c *conversation) {
	s.postInfoLocked(c, "deleting")
	s.closeEventServiceLocked(c)
	for _, w := range c.webhooks {
		w.flush() // WebhookSubscriber.close posts what is queued
	}
	c.deleted = true
	// The real EventService closes its PubSub: open sockets stay connected
	// but receive nothing more, and their inbound messages fail.
	c.subs = make(map[*socketConn]struct{})
	delete(s.conversations, c.id)
	s.notifySubsLocked()
}

// closeEventServiceLocked is EventService.close(), on DELETE and on a
// graceful shutdown: a run under way is paused first, so the log (and
// every socket still listening) gets execution_status paused and a
// PauseEvent, as recorded from the 1.58.2 server; then the run ends.
func (s *Server) closeEventServiceLocked(c *conversation) {
	if c.status() == StatusRunning {
		_, _ = s.setStatusLocked(c, StatusPaused)
		_, _ = s.appendLocked(c, PauseEvent())
	}
	s.cancelRunLocked(c)
}

// recoverCrashedRunLocked mirrors EventService start-up: a conversation
// persisted as running becomes error, and the first unmatched action gets an
// AgentErrorEvent unless its tool call was already answered.
func (s *Server) recoverCrashedRunLocked(c *conversation) {
	if c.status() != StatusRunning {
		return
	}
	_, _ = s.setStatusLocked(c, StatusError)
	pending := unmatchedActions(c.log)
	if len(pending) == 0 {
		return
	}
	first := pending[0]
	for _, se := range c.log {
		if isObservationLike(se.event.Kind()) && se.event["tool_call_id"] == first["tool_call_id"] {
			return
		}
	}
	ev := AgentErrorEvent(first, "A restart occurred while this tool was in progress. "+
		"This may indicate a fatal memory error or system crash. "+
		"The tool execution was interrupted and did not complete.",
		Classification{Kind: "internal"})
	ev["parent_id"] = first.ID()
	_, _ = s.appendLocked(c, ev)
}

func isObservationLike(kind string) bool {
	return kind == KindObservationEvent || kind == KindUserRejectObservation || kind == KindAgentErrorEvent
}

// unmatchedActions is ConversationState.get_unmatched_actions: executable
// ActionEvents with no later observation (by action_id) or AgentErrorEvent
// (by tool_call_id), in log order.
func unmatchedActions(log []storedEvent) []Event {
	observedActions := map[string]bool{}
	observedCalls := map[string]bool{}
	var out []Event
	for i := len(log) - 1; i >= 0; i-- {
		ev := log[i].event
		switch ev.Kind() {
		case KindObservationEvent, KindUserRejectObservation:
			observedActions[ev.str("action_id")] = true
		case KindAgentErrorEvent:
			observedCalls[ev.str("tool_call_id")] = true
		case KindActionEvent:
			if ev["action"] != nil && !observedActions[ev.ID()] && !observedCalls[ev.str("tool_call_id")] {
				out = append([]Event{ev}, out...)
			}
		}
	}
	return out
}

// jsonEqual compares two JSON values by their encoding (object keys sorted).
func jsonEqual(a, b any) bool {
	ra, errA := marshalJSON(a)
	rb, errB := marshalJSON(b)
	return errA == nil && errB == nil && bytes.Equal(ra, rb)
}
