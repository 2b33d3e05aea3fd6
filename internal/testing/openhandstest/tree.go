package openhandstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
)

// The conversation tree, as the 1.58.2 server models it
// (agent_server/conversation_service.py start_child_conversation and
// fork_conversation; ConversationInfo in agent_server/models.py): a child
// conversation names its parent (parent_conversation_id) and its parent
// lists it (sub_conversation_ids, derived from the catalog); a fork names
// its source conversation and, for a fork up to an event, that event
// (forked_from_conversation_id, forked_from_event_id).

// StartChildTool is the tool the server attaches to launch a child
// conversation on itself.
const StartChildTool = "start_child_conversation"

// ChildLaunch is StartChildConversationResponse: what POST
// /api/conversations/{id}/children answers and what the tool's observation
// carries.
type ChildLaunch struct {
	ConversationID       string `json:"conversation_id"`
	ParentConversationID string `json:"parent_conversation_id"`
	Status               string `json:"status"`
	Title                any    `json:"title"`
	URL                  any    `json:"url"`
	Workspace            string `json:"workspace"`
	Isolation            string `json:"isolation"`
}

// StartChild launches a child conversation of c as the server does: it
// inherits c's agent and workspace (the stub's workspaces are no git
// repositories, so the child shares c's directory: isolation "shared"),
// gets task as its first user message and starts running. The launch
// reports the status the server reads right after scheduling the run,
// before its loop starts (conversation_service.py
// _launch_prepared_conversation; EventService.run returns at once): idle.
func (c *Conversation) StartChild(task, title string) (ChildLaunch, error) {
	s := c.s
	s.mu.Lock()
	agent, _ := c.c.state["agent"].(map[string]any)
	workspace, _ := c.c.state["workspace"].(map[string]any)
	deleted := c.c.deleted
	s.mu.Unlock()
	if deleted {
		return ChildLaunch{}, ErrConversationDeleted
	}
	workingDir, _ := workspace["working_dir"].(string)
	child, err := s.CreateConversation(ConversationOptions{Title: title, Agent: agent, WorkingDir: workingDir, Parent: c.c.id})
	if err != nil {
		return ChildLaunch{}, fmt.Errorf("start child conversation: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	status := child.c.status()
	if _, err := s.sendMessageLocked(child.c, map[string]any{"role": "user", "content": []any{textContent(task)}}, true); err != nil {
		return ChildLaunch{}, fmt.Errorf("start child conversation: %w", err)
	}
	return ChildLaunch{
		ConversationID: child.c.id, ParentConversationID: c.c.id, Status: status,
		Title: child.c.title, Workspace: workingDir, Isolation: "shared",
	}, nil
}

// ForkOptions is ForkConversationRequest.
type ForkOptions struct {
	// ID is the fork's id (default a random uuid4).
	ID string `json:"id,omitempty"`
	// Title is the fork's title ("" = null).
	Title string `json:"title,omitempty"`
	// FromEventID, when set, forks the history up to and including that
	// event; "" forks all of it.
	FromEventID string `json:"from_event_id,omitempty"`
}

// Fork copies c as the server's fork does, with the same event ids, the
// state, in status idle, linked to its source: the whole log, or with
// FromEventID the branch from the root up to and including that event
// (the SDK's LocalConversation.fork copies path_to_root(from_event_id):
// the parent_id chain, so no state update and no other branch). Nothing
// is published to sockets and, unlike a start or a child, no
// ConversationInfo is posted (fork_conversation notifies no webhook): the
// webhooks first see the fork in the batch its subscription snapshot
// starts.
func (c *Conversation) Fork(opts ForkOptions) (*Conversation, error) {
	s := c.s
	s.mu.Lock()
	log := append([]storedEvent(nil), c.c.log...)
	if opts.FromEventID != "" {
		branch, ok := c.c.pathToRoot(opts.FromEventID)
		if !ok {
			s.mu.Unlock()
			return nil, fmt.Errorf("fork: from_event_id %s is not an event of %s", opts.FromEventID, c.c.id)
		}
		log = branch
	}
	state := make(map[string]any, len(c.c.state))
	for k, v := range c.c.state {
		state[k] = v
	}
	state["execution_status"] = StatusIdle
	source := c.c.id
	s.mu.Unlock()

	fork, err := s.createConversation(ConversationOptions{ID: opts.ID, Title: opts.Title, State: state}, func(f *conversation) {
		f.forkedFrom, f.forkedAt = source, opts.FromEventID
		f.log = log
		for i, se := range log {
			f.index[se.event.ID()] = i
			if se.event.Kind() != KindConversationStateUpdateEvent {
				f.leafID = se.event.ID()
			}
		}
		s.subscribeWebhooksLocked(f)
	})
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	return fork, nil
}

// rootParentID is the SDK's explicit root marker for parent_id
// (sdk/event/types.py ROOT_PARENT_ID).
const rootParentID = "__root__"

// pathToRoot is the SDK's EventLog.path_to_root (event_store.py): the
// events from leaf back along parent_id, root first; an event without
// parent_id has the one logged before it as its parent, the first none.
// False when leaf, or an ancestor, is not in the log, or on a cycle.
func (c *conversation) pathToRoot(leaf string) ([]storedEvent, bool) {
	var chain []storedEvent
	seen := map[string]bool{}
	for id := leaf; id != ""; {
		i, ok := c.index[id]
		if !ok || seen[id] {
			return nil, false
		}
		seen[id] = true
		chain = append(chain, c.log[i])
		switch id = c.log[i].event.ParentID(); {
		case id == rootParentID:
			id = ""
		case id == "" && i > 0:
			id = c.log[i-1].event.ID()
		}
	}
	slices.Reverse(chain)
	return chain, true
}

// lineageLocked puts the tree fields on c's ConversationInfo.
func (s *Server) lineageLocked(c *conversation, info map[string]any) {
	info["parent_conversation_id"] = nullable(c.parentID)
	info["forked_from_conversation_id"] = nullable(c.forkedFrom)
	info["forked_from_event_id"] = nullable(c.forkedAt)
	children := []any{}
	for _, other := range s.conversations {
		if other.parentID == c.id {
			children = append(children, other.id)
		}
	}
	info["sub_conversation_ids"] = children
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// notFoundDetail is the 404 of the tree routes, which name what is missing.
func notFoundDetail(detail string) notFound {
	return func(w http.ResponseWriter, _ string) { writeDetail(w, http.StatusNotFound, detail) }
}

// handleStartChild is POST /api/conversations/{id}/children: 201 with
// StartChildConversationResponse.
func (s *Server) handleStartChild(w http.ResponseWriter, r *http.Request, c *conversation) {
	var req struct {
		Task  *string `json:"task"`
		Title string  `json:"title"`
	}
	body, _ := readBody(r)
	if err := json.Unmarshal(body, &req); err != nil || req.Task == nil {
		writeValidationError(w, []any{"body", "task"}, "missing", "Field required", string(body))
		return
	}
	launch, err := (&Conversation{s: s, c: c}).StartChild(*req.Task, req.Title)
	if err != nil {
		writeServerError(w, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, launch)
}

// handleFork is POST /api/conversations/{id}/fork: 201 with the fork's
// ConversationInfo; an unknown from_event_id is 404.
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request, c *conversation) {
	var opts ForkOptions
	if body, _ := readBody(r); len(body) > 0 {
		if err := json.Unmarshal(body, &opts); err != nil {
			writeValidationError(w, []any{"body"}, "json_invalid", "JSON decode error", string(body))
			return
		}
	}
	fork, err := (&Conversation{s: s, c: c}).Fork(opts)
	if err != nil {
		writeDetail(w, http.StatusNotFound, err.Error())
		return
	}
	s.mu.Lock()
	info := s.conversationInfoLocked(fork.c)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, info)
}

// StartChildAction builds the ActionEvent of the agent calling
// start_child_conversation.
func StartChildAction(task, title string) Event {
	action := map[string]any{"kind": "StartChildConversationAction", "task": task, "isolation": "worktree"}
	if title != "" {
		action["title"] = title
	}
	return ActionEvent(ActionSpec{ToolName: StartChildTool, Action: action})
}

// StartChildObservation builds the tool's ObservationEvent reporting
// launch (tools/child_conversation/impl.py: a summary line and the
// response as indented JSON for text, plus the response's fields on the
// observation, a null one left off).
func StartChildObservation(action Event, launch ChildLaunch) Event {
	var dump bytes.Buffer
	enc := json.NewEncoder(&dump)
	enc.SetEscapeHTML(false) // json.dumps escapes no HTML
	enc.SetIndent("", "  ")
	_ = enc.Encode(launch) // strings and nulls: cannot fail
	text := fmt.Sprintf("Started child conversation %s (status: %s).\n%s", launch.ConversationID, launch.Status, bytes.TrimSuffix(dump.Bytes(), []byte("\n")))
	ev := ObservationEvent(action, text, false)
	obs := ev["observation"].(map[string]any)
	obs["kind"] = "StartChildConversationObservation"
	obs["conversation_id"] = launch.ConversationID
	obs["parent_conversation_id"] = launch.ParentConversationID
	obs["status"] = launch.Status
	obs["workspace"] = launch.Workspace
	obs["isolation"] = launch.Isolation
	if launch.Title != nil {
		obs["title"] = launch.Title
	}
	return ev
}
