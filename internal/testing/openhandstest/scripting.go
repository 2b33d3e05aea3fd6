package openhandstest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ConversationOptions configures [Server.CreateConversation]. Zero fields
// get plausible defaults.
type ConversationOptions struct {
	// ID is the conversation id, dashed or hex (default a random uuid4).
	ID string
	// Title is the conversation title ("" = null).
	Title string
	// Status is the initial execution status (default idle).
	Status string
	// CreatedAt defaults to now; it drives the search sort order.
	CreatedAt time.Time
	// Tags are the conversation tags.
	Tags map[string]string
	// Agent is the agent JSON (default an Agent with a masked fake LLM key).
	Agent map[string]any
	// WorkingDir is the LocalWorkspace directory (default "/workspace/project").
	WorkingDir string
	// ConfirmationPolicy defaults to {"kind":"NeverConfirm"}.
	ConfirmationPolicy map[string]any
	// State holds extra ConversationState fields, merged last.
	State map[string]any
	// Parent makes the conversation a child of this one (dashed id), as
	// [Conversation.StartChild] does, without sending it a task.
	Parent string
}

// Conversation is a scripting handle on one conversation of a [Server]. All
// methods are safe for concurrent use.
type Conversation struct {
	s *Server
	c *conversation
}

// CreateConversation adds a conversation, as if a client had started one.
// Nothing is published to sockets: the real server's start events happen
// before any client can subscribe. Each webhook gets the state snapshot
// its subscription starts with, and the ConversationInfo is posted.
func (s *Server) CreateConversation(opts ConversationOptions) (*Conversation, error) {
	return s.createConversation(opts, func(c *conversation) {
		s.subscribeWebhooksLocked(c)
		s.postInfoLocked(c, "")
	})
}

// createConversation adds a conversation and, under the server's lock,
// lets started do what its kind of start does.
func (s *Server) createConversation(opts ConversationOptions, started func(*conversation)) (*Conversation, error) {
	id := NewUUID()
	if opts.ID != "" {
		parsed, ok := parseUUID(opts.ID)
		if !ok {
			return nil, fmt.Errorf("create conversation: id %q is not a UUID", opts.ID)
		}
		id = parsed
	}
	if opts.Status == "" {
		opts.Status = StatusIdle
	}
	if !knownStatuses[opts.Status] {
		return nil, fmt.Errorf("create conversation: unknown execution status %q", opts.Status)
	}
	state, err := initialState(id, opts)
	if err != nil {
		return nil, fmt.Errorf("create conversation: %w", err)
	}
	createdAt := opts.CreatedAt
	if createdAt.IsZero() {
		createdAt = s.cfg.Clock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.conversations[id]; exists {
		return nil, fmt.Errorf("create conversation: %s already exists", id)
	}
	c := &conversation{
		id:        id,
		created:   s.nextCreated,
		createdAt: createdAt,
		updatedAt: createdAt,
		state:     state,
		index:     make(map[string]int),
		subs:      make(map[*socketConn]struct{}),
	}
	if opts.Title != "" {
		c.title = opts.Title
	}
	c.parentID = opts.Parent
	c.webhooks = s.newWebhookSubscribers(c)
	s.nextCreated++
	s.conversations[id] = c
	started(c)
	return &Conversation{s: s, c: c}, nil
}

func initialState(id string, opts ConversationOptions) (map[string]any, error) {
	agent := opts.Agent
	if agent == nil {
		agent = map[string]any{
			"kind": "Agent",
			"llm": map[string]any{
				"model": "openai/fake-model", "api_key": "**********", "usage_id": "agent",
				"api_mode": "chat", "stream": false, "native_tool_calling": true, "num_retries": 5,
			},
			"tools":                 []any{map[string]any{"name": "terminal", "params": map[string]any{}}},
			"include_default_tools": []any{"FinishTool", "ThinkTool"},
		}
	}
	workingDir := opts.WorkingDir
	if workingDir == "" {
		workingDir = "/workspace/project"
	}
	policy := opts.ConfirmationPolicy
	if policy == nil {
		policy = map[string]any{"kind": "NeverConfirm"}
	}
	tags := map[string]any{}
	for k, v := range opts.Tags {
		tags[k] = v
	}
	state := map[string]any{
		"agent":                      agent,
		"workspace":                  map[string]any{"kind": "LocalWorkspace", "working_dir": workingDir},
		"persistence_dir":            "workspace/conversations/" + hexID(id),
		"max_iterations":             500,
		"stuck_detection":            true,
		"execution_status":           opts.Status,
		"confirmation_policy":        policy,
		"security_analyzer":          nil,
		"activated_knowledge_skills": []any{},
		"invoked_skills":             []any{},
		"blocked_actions":            map[string]any{},
		"blocked_messages":           map[string]any{},
		"last_user_message_id":       nil,
		"stats":                      map[string]any{"usage_to_metrics": map[string]any{}},
		"secret_registry":            map[string]any{"secret_sources": map[string]any{}},
		"tags":                       tags,
		"agent_state":                map[string]any{},
		"hook_config":                nil,
	}
	for k, v := range opts.State {
		state[k] = v
	}
	// Normalise to decoded JSON so snapshots and change detection compare
	// like with like.
	raw, err := marshalJSON(state)
	if err != nil {
		return nil, err
	}
	return decodeEvent(raw)
}

// Conversation returns the handle of a live conversation (dashed or hex id).
func (s *Server) Conversation(id string) (*Conversation, bool) {
	dashed, ok := parseUUID(id)
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conversations[dashed]
	if !ok {
		return nil, false
	}
	return &Conversation{s: s, c: c}, true
}

// Conversations returns every live conversation in creation order.
func (s *Server) Conversations() []*Conversation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conversation, 0, len(s.conversations))
	for _, c := range s.conversations {
		out = append(out, &Conversation{s: s, c: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].c.created < out[j].c.created })
	return out
}

// ID returns the dashed conversation id.
func (c *Conversation) ID() string { return c.c.id }

// HexID returns the dashless id conversation paging uses.
func (c *Conversation) HexID() string { return hexID(c.c.id) }

// Append emits ev as the agent server would: it fills in a missing `id`,
// `timestamp` and `parent_id` (the current HEAD), persists it, and publishes
// it to every socket. A per-field ConversationStateUpdateEvent also updates
// the state that REST and full_state report. StreamingDeltaEvents and
// full_state snapshots are only published, never persisted. It returns the
// event as stored.
func (c *Conversation) Append(ev Event) (Event, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.appendLocked(c.c, ev)
}

// AppendJSON persists and publishes one raw JSON event verbatim (no
// stamping); it must be an object with a string `id`.
func (c *Conversation) AppendJSON(raw []byte) (Event, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.persistLocked(c.c, raw)
}

// Publish sends ev to every socket without persisting it (a transient event,
// like the snapshots and deltas); a missing id and timestamp are filled in.
func (c *Conversation) Publish(ev Event) (Event, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.c.deleted {
		return nil, ErrConversationDeleted
	}
	pub, out, err := c.s.stampTransient(ev)
	if err != nil {
		return nil, err
	}
	c.s.publishLocked(c.c, pub)
	return out, nil
}

// SetState assigns one ConversationState field. Like the SDK it emits a
// persisted ConversationStateUpdateEvent only when the value changes; it
// returns that event, or nil when nothing changed.
func (c *Conversation) SetState(key string, value any) (Event, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.setStateLocked(c.c, key, value)
}

// SetStatus sets the execution status (emitting the state update event).
func (c *Conversation) SetStatus(status string) (Event, error) {
	if !knownStatuses[status] {
		return nil, fmt.Errorf("set status of %s: unknown execution status %q", c.c.id, status)
	}
	return c.SetState("execution_status", status)
}

// Status returns the current execution status.
func (c *Conversation) Status() string {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.c.status()
}

// SetTitle sets the title REST reports (no event, like the stored
// metadata) and, like the server's update, moves updated_at and posts the
// ConversationInfo to the webhooks: the one channel a rename shows on.
func (c *Conversation) SetTitle(title string) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, _ = c.s.updateLocked(c.c, &title, nil) // no tags: nothing to fail
}

// SetTags does what the server's update (PATCH {"tags": …}) does: tags
// are a state field (1.58.2), so the change is recorded as a stored
// ConversationStateUpdateEvent(key=tags); then updated_at moves and the
// ConversationInfo is posted to the webhooks, as for a rename.
func (c *Conversation) SetTags(tags map[string]string) (Event, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.updateLocked(c.c, nil, tags)
}

// updateLocked is update_conversation: the title (stored metadata, no
// event) and the tags (a state field: a stored state update when they
// change), then updated_at and one ConversationInfo POST. It returns the
// tags' state update, nil when there is none.
func (s *Server) updateLocked(c *conversation, title *string, tags map[string]string) (Event, error) {
	if title != nil {
		c.title = strings.TrimSpace(*title)
	}
	var ev Event
	if tags != nil {
		value := make(map[string]any, len(tags))
		for k, v := range tags {
			value[k] = v
		}
		var err error
		if ev, err = s.setStateLocked(c, "tags", value); err != nil {
			return nil, err
		}
	}
	c.updatedAt = s.cfg.Clock()
	s.postInfoLocked(c, "")
	return ev, nil
}

// Events returns the persisted log in order (index = seq).
func (c *Conversation) Events() []Event {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	out := make([]Event, 0, len(c.c.log))
	for _, se := range c.c.log {
		if ev, err := decodeEvent(se.raw); err == nil {
			out = append(out, ev)
		}
	}
	return out
}

// SendUserMessage does what POST .../events does: append a user
// MessageEvent (and the last_user_message_id update), starting a run when
// run is true.
func (c *Conversation) SendUserMessage(text string, run bool) (Event, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.sendMessageLocked(c.c, map[string]any{
		"role": "user", "content": []any{textContent(text)}, "thinking_blocks": []any{},
	}, run)
}

// Run starts a run as POST .../run does; it fails while running.
func (c *Conversation) Run() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.startRunLocked(c.c)
}

// Pause pauses as POST .../pause does.
func (c *Conversation) Pause() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.pauseLocked(c.c)
}

// Interrupt interrupts as POST .../interrupt does.
func (c *Conversation) Interrupt() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.interruptLocked(c.c)
}

// FinishRun ends the current run the way the agent loop does: set status
// (finished, error, stuck, waiting_for_confirmation, ...) and publish the
// end-of-run full_state snapshot.
func (c *Conversation) FinishRun(status string) error {
	if !knownStatuses[status] {
		return fmt.Errorf("finish run of %s: unknown execution status %q", c.c.id, status)
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.finishRunLocked(c.c, status)
}

// Delete deletes the conversation as DELETE /api/conversations/{id} does.
// Open sockets stay connected but receive nothing more.
func (c *Conversation) Delete() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.c.deleted {
		return ErrConversationDeleted
	}
	c.s.deleteLocked(c.c)
	return nil
}

// Sockets returns how many sockets are subscribed and past their replay.
func (c *Conversation) Sockets() int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.liveSocketsLocked()
}

func (c *Conversation) liveSocketsLocked() int {
	n := 0
	for sc := range c.c.subs {
		if sc.live {
			n++
		}
	}
	return n
}

// WaitSockets waits until at least n sockets are subscribed and past their
// replay, so that what is appended next reaches them live.
func (c *Conversation) WaitSockets(ctx context.Context, n int) error {
	for {
		c.s.mu.Lock()
		live, changed := c.liveSocketsLocked(), c.s.subsChanged
		c.s.mu.Unlock()
		if live >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for %d sockets on %s (have %d): %w", n, c.c.id, live, ctx.Err())
		}
	}
}

// DropSockets closes every socket of the conversation abruptly: TCP goes
// away without a close frame.
func (c *Conversation) DropSockets() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for sc := range c.s.conns {
		if sc.conversationID == c.c.id {
			sc.abort()
		}
	}
}

// CloseSockets closes every socket of the conversation with a close frame
// carrying code and reason, after the frames already queued.
func (c *Conversation) CloseSockets(code int, reason string) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for sc := range c.s.conns {
		if sc.conversationID == c.c.id {
			sc.out.closeAfterPending(code, reason)
		}
	}
}

// InjectFrame sends data as a text frame, verbatim, to every subscribed
// socket of the conversation on endpoint ("" = both endpoints), bypassing
// the event log. See BadJSONFrame and friends for ready-made malformed
// frames. It returns how many sockets got the frame.
func (c *Conversation) InjectFrame(endpoint Endpoint, data []byte) int {
	return c.inject(endpoint, outFrame{data: data})
}

// inject queues a copy of f on every subscribed socket on endpoint.
func (c *Conversation) inject(endpoint Endpoint, f outFrame) int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	n := 0
	for sc := range c.c.subs {
		if endpoint != "" && sc.endpoint != endpoint {
			continue
		}
		f.data = append([]byte(nil), f.data...)
		if sc.out.offerFrame(f) == nil {
			n++
		}
	}
	return n
}

// TrickleFrame sends data as one text frame to every subscribed socket of
// the conversation on endpoint ("" = both endpoints), after the frames
// already queued: its header at once, announcing the whole length, then
// its payload a byte every interval, holding every later frame back. It
// returns how many sockets got it.
func (c *Conversation) TrickleFrame(endpoint Endpoint, data []byte, interval time.Duration) int {
	return c.inject(endpoint, outFrame{data: data, trickle: interval})
}

// StallSockets makes every socket of the conversation stop forwarding, as
// a stuck proxy or a NAT that forgot the flow would: TCP stays open, but
// nothing the server writes reaches the client any more, and nothing the
// client writes (pings included) reaches the server, which so answers
// nothing. Connections made later are not stalled.
func (c *Conversation) StallSockets() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for sc := range c.s.conns {
		if sc.conversationID == c.c.id {
			sc.fault.stalled.Store(true)
		}
	}
}

// RefuseSockets makes the next n socket connections to this conversation
// fail after auth with close 1013 and reason ("" = "Too many connections
// for this conversation", the subscriber-limit refusal).
func (c *Conversation) RefuseSockets(n int, reason string) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.c.refusal.count = n
	c.c.refusal.reason = reason
}

// RefuseSocketsFor refuses every socket connection for d, like RefuseSockets.
func (c *Conversation) RefuseSocketsFor(d time.Duration, reason string) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.c.refusal.until = time.Now().Add(d)
	c.c.refusal.reason = reason
}

// OnNextReplay runs fn during the next legacy-socket replay of this
// conversation, once `after` history frames have been queued (0 = after
// subscribing, before the log is read; past the end = when replay ends). What
// fn appends reaches that socket live, in the middle of the replay, as the
// real server's replay-after-subscribe allows.
func (c *Conversation) OnNextReplay(after int, fn func()) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.c.hooks = append(c.c.hooks, replayHook{after: after, fn: fn})
}

// InterleaveNextReplay appends events in the middle of the next legacy
// replay (see OnNextReplay). With after = 0 they are appended before the
// log is read, so the socket receives each twice: live, then replayed.
func (c *Conversation) InterleaveNextReplay(after int, events ...Event) {
	c.OnNextReplay(after, func() {
		for _, ev := range events {
			_, _ = c.Append(ev) // only fails once deleted, when nothing is left to interleave with
		}
	})
}
