package openhandstest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRESTAuth(t *testing.T) {
	s := Start(t, Config{SessionAPIKeys: []string{testKey}})
	anonymous := newAPIClient(t, s, "")
	for path, want := range map[string]string{
		"/alive": `{"status":"ok"}`, "/health": `{"status":"ok"}`, "/ready": `{"status":"ready"}`,
	} {
		status, body := anonymous.do(http.MethodGet, path, nil)
		assert.Equal(t, http.StatusOK, status, path)
		assert.JSONEq(t, want, string(body), path)
	}
	for _, key := range []string{"", "wrong"} {
		status, body := newAPIClient(t, s, key).do(http.MethodGet, "/api/conversations/search", nil)
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.JSONEq(t, `{"detail":"Unauthorized"}`, string(body))
	}
	status, _ := newAPIClient(t, s, testKey).do(http.MethodGet, "/api/conversations/search", nil)
	assert.Equal(t, http.StatusOK, status)
}

func TestConversationSearch(t *testing.T) {
	s := Start(t, Config{})
	base := time.Date(2026, 8, 22, 14, 0, 0, 0, time.UTC)
	var convs []*Conversation
	for i := range 5 {
		status := StatusIdle
		if i%2 == 1 {
			status = StatusFinished
		}
		convs = append(convs, newConversation(t, s, ConversationOptions{
			CreatedAt: base.Add(time.Duration(i) * time.Minute), Status: status,
		}))
	}
	api := newAPIClient(t, s, "")

	t.Run("pages follow hex next_page_id, newest first", func(t *testing.T) {
		var got []string
		path := "/api/conversations/search?limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5, "paging does not end")
			page := api.getJSON(path)
			for _, item := range page["items"].([]any) {
				got = append(got, item.(map[string]any)["id"].(string))
			}
			next, _ := page["next_page_id"].(string)
			if next == "" {
				assert.Contains(t, page, "next_page_id", "null is sent, not omitted")
				break
			}
			assert.Len(t, next, 32, "next_page_id is hex without dashes")
			assert.NotContains(t, next, "-")
			path = "/api/conversations/search?limit=2&page_id=" + next
		}
		want := []string{convs[4].ID(), convs[3].ID(), convs[2].ID(), convs[1].ID(), convs[0].ID()}
		assert.Equal(t, want, got)
	})
	t.Run("page_id is inclusive", func(t *testing.T) {
		page := api.getJSON("/api/conversations/search?limit=1&page_id=" + convs[2].HexID())
		assert.Equal(t, convs[2].ID(), page["items"].([]any)[0].(map[string]any)["id"])
		assert.Equal(t, convs[1].HexID(), page["next_page_id"])
	})
	t.Run("unknown page_id restarts at zero", func(t *testing.T) {
		page := api.getJSON("/api/conversations/search?limit=1&page_id=" + convs[2].ID()) // dashed: unknown
		assert.Equal(t, convs[4].ID(), page["items"].([]any)[0].(map[string]any)["id"])
	})
	t.Run("status filter and ascending order", func(t *testing.T) {
		page := api.getJSON("/api/conversations/search?status=finished&sort_order=CREATED_AT")
		var got []string
		for _, item := range page["items"].([]any) {
			got = append(got, item.(map[string]any)["id"].(string))
		}
		assert.Equal(t, []string{convs[1].ID(), convs[3].ID()}, got)
		assert.Nil(t, page["next_page_id"])
	})
	t.Run("ConversationInfo shape", func(t *testing.T) {
		info := api.getJSON("/api/conversations/" + convs[0].ID())
		assert.Equal(t, convs[0].ID(), info["id"])
		assert.Equal(t, StatusIdle, info["execution_status"])
		assert.Equal(t, "2026-08-22T14:00:00Z", info["created_at"])
		assert.True(t, strings.HasSuffix(info["updated_at"].(string), "Z"))
		for _, key := range []string{"title", "metrics", "security_analyzer", "parent_conversation_id"} {
			assert.Contains(t, info, key, "nulls are included")
			assert.Nil(t, info[key], key)
		}
		agent := info["agent"].(map[string]any)
		assert.Equal(t, "**********", agent["llm"].(map[string]any)["api_key"])
		assert.Equal(t, convs[0].ID(), api.getJSON("/api/conversations/" + convs[0].HexID())["id"], "hex ids parse too")
	})
	t.Run("validation and not found", func(t *testing.T) {
		for _, query := range []string{"limit=0", "limit=101", "limit=abc", "sort_order=NEWEST", "status=done"} {
			status, body := api.do(http.MethodGet, "/api/conversations/search?"+query, nil)
			assert.Equal(t, http.StatusUnprocessableEntity, status, query)
			assert.Contains(t, string(body), `"detail":[`, query)
		}
		status, body := api.do(http.MethodGet, "/api/conversations/"+NewUUID(), nil)
		assert.Equal(t, http.StatusNotFound, status)
		assert.JSONEq(t, `{"detail":"Not Found"}`, string(body))
		status, _ = api.do(http.MethodGet, "/api/conversations/not-a-uuid", nil)
		assert.Equal(t, http.StatusUnprocessableEntity, status)
	})
}

func TestEventSearch(t *testing.T) {
	s := Start(t, Config{Clock: steppingClock(time.Date(2026, 8, 22, 14, 3, 11, 0, time.UTC), 1500*time.Microsecond)})
	c := newConversation(t, s, ConversationOptions{})
	first := appendAll(t, c, MessageEvent("user", "List the files"), TerminalAction("ls -la"))
	appendAll(t, c, ObservationEvent(first[1], "total 0", false), MessageEvent("agent", "Nothing here"))
	api := newAPIClient(t, s, "")
	search := func(query url.Values) ([]string, any) {
		t.Helper()
		page := api.getJSON("/api/conversations/" + c.ID() + "/events/search?" + query.Encode())
		var got []string
		for _, item := range page["items"].([]any) {
			got = append(got, item.(map[string]any)["id"].(string))
		}
		return got, page["next_page_id"]
	}
	events := c.Events()
	all := eventIDs(events)

	tests := []struct {
		name     string
		query    url.Values
		want     []string
		wantNext any
	}{
		{name: "everything", query: url.Values{}, want: all},
		{name: "kind by fully-qualified class path",
			query: url.Values{"kind": {"openhands.sdk.event.llm_convertible.message.MessageEvent"}},
			want:  []string{all[0], all[3]}},
		{name: "bare kind matches nothing", query: url.Values{"kind": {"MessageEvent"}}, want: nil},
		{name: "source", query: url.Values{"source": {"environment"}}, want: []string{all[2]}},
		{name: "body", query: url.Values{"body": {"nothing HERE"}}, want: []string{all[3]}},
		{name: "first page names the next item", query: url.Values{"limit": {"2"}}, want: all[:2], wantNext: all[2]},
		{name: "page_id is inclusive", query: url.Values{"limit": {"2"}, "page_id": {all[2]}}, want: all[2:]},
		{name: "unknown page_id restarts", query: url.Values{"limit": {"1"}, "page_id": {"nope"}}, want: all[:1], wantNext: all[1]},
		{name: "descending", query: url.Values{"sort_order": {"TIMESTAMP_DESC"}, "limit": {"3"}},
			want: []string{all[3], all[2], all[1]}, wantNext: all[0]},
		{name: "timestamp window", query: url.Values{
			"timestamp__gte": {events[1].Timestamp()}, "timestamp__lt": {events[3].Timestamp()}},
			want: []string{all[1], all[2]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next := search(tt.query)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantNext, next)
		})
	}

	t.Run("errors", func(t *testing.T) {
		missing := NewUUID()
		status, body := api.do(http.MethodGet, "/api/conversations/"+missing+"/events/search", nil)
		assert.Equal(t, http.StatusNotFound, status)
		assert.JSONEq(t, `{"detail":"Conversation not found: `+missing+`"}`, string(body))
		for _, query := range []string{"limit=101", "sort_order=ASC", "timestamp__gte=yesterday"} {
			status, _ := api.do(http.MethodGet, "/api/conversations/"+c.ID()+"/events/search?"+query, nil)
			assert.Equal(t, http.StatusUnprocessableEntity, status, query)
		}
	})
	t.Run("count and get", func(t *testing.T) {
		status, body := api.do(http.MethodGet, "/api/conversations/"+c.ID()+"/events/count?source=user", nil)
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, "1", string(body))
		ev := api.getJSON("/api/conversations/" + c.ID() + "/events/" + all[1])
		assert.Equal(t, KindActionEvent, ev["kind"])
		assert.Equal(t, all[0], ev["parent_id"])
	})
}

func TestSearchFaults(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{})
	newConversation(t, s, ConversationOptions{})
	appendAll(t, c, MessageEvent("user", "a"), MessageEvent("agent", "b"))
	api := newAPIClient(t, s, "")
	convPath := "/api/conversations/search?limit=1"
	eventPath := "/api/conversations/" + c.ID() + "/events/search?limit=1"

	s.SetConversationSearchFault(SearchLoop)
	s.SetEventSearchFault(SearchLoop)
	convPage := api.getJSON(convPath)
	assert.Equal(t, hexID(convPage["items"].([]any)[0].(map[string]any)["id"].(string)), convPage["next_page_id"])
	eventPage := api.getJSON(eventPath)
	assert.Equal(t, eventPage["items"].([]any)[0].(map[string]any)["id"], eventPage["next_page_id"])

	s.SetConversationSearchFault(SearchGarbage)
	s.SetEventSearchFault(SearchServerError)
	status, body := api.do(http.MethodGet, convPath, nil)
	assert.Equal(t, http.StatusOK, status)
	assert.False(t, json.Valid(body))
	status, body = api.do(http.MethodGet, eventPath, nil)
	assert.Equal(t, http.StatusInternalServerError, status)
	assert.Contains(t, string(body), `"detail":"Internal Server Error"`)
}

func TestControlEndpoints(t *testing.T) {
	type step struct {
		method, path string
		body         any
		wantStatus   int
		wantBody     string // JSON; "" = not checked
		wantState    string // execution status afterwards; "" = not checked
	}
	success := `{"success":true}`
	tests := []struct {
		name    string
		initial string
		steps   []step
		// wantKinds lists the kinds appended to the log, in order.
		wantKinds []string
	}{
		{name: "unknown conversation", steps: []step{
			// 1.58.2 answers 404 where 1.43.1 answered 400 (section G).
			{"POST", "/pause", nil, 404, `{"detail":"Not Found"}`, ""},
			{"POST", "/interrupt", nil, 404, `{"detail":"Not Found"}`, ""},
			{"POST", "/run", nil, 404, `{"detail":"Not Found"}`, ""},
			{"DELETE", "", nil, 404, `{"detail":"Not Found"}`, ""},
		}},
		{name: "run then run again conflicts", initial: StatusIdle, steps: []step{
			{"POST", "/run", nil, 200, success, StatusRunning},
			{"POST", "/run", nil, 409, `{"detail":"Conversation already running. Wait for completion or pause first."}`, StatusRunning},
		}, wantKinds: []string{KindConversationStateUpdateEvent}},
		{name: "pause running then resume", initial: StatusRunning, steps: []step{
			{"POST", "/pause", nil, 200, success, StatusPaused},
			{"POST", "/pause", nil, 200, success, StatusPaused},
			{"POST", "/run", nil, 200, success, StatusRunning},
		}, wantKinds: []string{KindConversationStateUpdateEvent, KindPauseEvent, KindConversationStateUpdateEvent}},
		{name: "pause leaves other statuses alone", initial: StatusFinished, steps: []step{
			{"POST", "/pause", nil, 200, success, StatusFinished},
		}},
		{name: "interrupt without a run falls back to pause", initial: StatusIdle, steps: []step{
			{"POST", "/interrupt", nil, 200, success, StatusPaused},
		}, wantKinds: []string{KindConversationStateUpdateEvent, KindPauseEvent}},
		{name: "send message appends without running", initial: StatusFinished, steps: []step{
			{"POST", "/events", map[string]any{"content": []any{map[string]any{"type": "text", "text": "more"}}}, 200, success, StatusIdle},
		}, wantKinds: []string{KindConversationStateUpdateEvent, KindMessageEvent, KindConversationStateUpdateEvent}},
		{name: "send message with run", initial: StatusIdle, steps: []step{
			{"POST", "/events", map[string]any{"role": "user", "content": []any{}, "run": true}, 200, success, StatusRunning},
		}, wantKinds: []string{KindMessageEvent, KindConversationStateUpdateEvent, KindConversationStateUpdateEvent}},
		{name: "send message with a bad role", initial: StatusIdle, steps: []step{
			{"POST", "/events", map[string]any{"role": "robot"}, 422, "", StatusIdle},
			{"POST", "/events", map[string]any{"role": "assistant"}, 500, "", StatusIdle},
		}},
		{name: "accept confirmation runs", initial: StatusWaitingForConfirmation, steps: []step{
			{"POST", "/events/respond_to_confirmation", map[string]any{"accept": true}, 200, success, StatusRunning},
			{"POST", "/events/respond_to_confirmation", map[string]any{"accept": true}, 200, success, StatusRunning},
		}, wantKinds: []string{KindConversationStateUpdateEvent}},
		{name: "confirmation needs accept", initial: StatusWaitingForConfirmation, steps: []step{
			{"POST", "/events/respond_to_confirmation", map[string]any{"reason": "no"}, 422, "", StatusWaitingForConfirmation},
		}},
		{name: "delete", initial: StatusIdle, steps: []step{
			{"DELETE", "", nil, 200, success, ""},
			{"GET", "", nil, 404, `{"detail":"Not Found"}`, ""},
			{"DELETE", "", nil, 404, "", ""},
		}},
		{name: "delete pauses a run under way first", initial: StatusRunning, steps: []step{
			{"DELETE", "", nil, 200, success, ""},
		}, wantKinds: []string{KindConversationStateUpdateEvent, KindPauseEvent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, Config{SessionAPIKeys: []string{testKey}})
			api := newAPIClient(t, s, testKey)
			id := NewUUID()
			var c *Conversation
			if tt.initial != "" {
				c = newConversation(t, s, ConversationOptions{ID: id, Status: tt.initial})
			}
			for i, st := range tt.steps {
				status, body := api.do(st.method, "/api/conversations/"+id+st.path, st.body)
				assert.Equal(t, st.wantStatus, status, "step %d: %s", i, body)
				if st.wantBody != "" {
					assert.JSONEq(t, st.wantBody, string(body), "step %d", i)
				}
				if st.wantState != "" {
					assert.Equal(t, st.wantState, c.Status(), "step %d", i)
				}
			}
			if c == nil {
				return
			}
			var kinds []string
			for _, ev := range c.Events() {
				kinds = append(kinds, ev.Kind())
			}
			assert.Equal(t, tt.wantKinds, kinds)
		})
	}
}

func TestRejectConfirmation(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{ConfirmationPolicy: map[string]any{"kind": "AlwaysConfirm"}})
	actions := appendAll(t, c, TerminalAction("rm -rf /tmp/x"), TerminalAction("ls"))
	require.NoError(t, c.FinishRun(StatusWaitingForConfirmation))
	status, _ := newAPIClient(t, s, "").do(http.MethodPost, "/api/conversations/"+c.ID()+"/events/respond_to_confirmation",
		map[string]any{"accept": false})
	require.Equal(t, http.StatusOK, status)

	assert.Equal(t, StatusIdle, c.Status(), "rejection does not run the agent")
	events := c.Events()
	require.Len(t, events, 6)
	assert.Equal(t, StatusIdle, events[3]["value"])
	for i, action := range actions {
		reject := events[4+i]
		assert.Equal(t, KindUserRejectObservation, reject.Kind())
		assert.Equal(t, action.ID(), reject["action_id"])
		assert.Equal(t, action["tool_call_id"], reject["tool_call_id"])
		assert.Equal(t, "User rejected the action.", reject["rejection_reason"], "the REST default has a period")
	}
}

func TestInterruptRunning(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{})
	require.NoError(t, c.Run())
	answered := appendAll(t, c, TerminalAction("ls"))[0]
	pending := appendAll(t, c, ObservationEvent(answered, "ok", false), TerminalAction("sleep 100"))[1]
	conn := mustDial(t, s, EndpointEvents, c.ID(), nil)
	require.True(t, isFullState(readFrame(t, conn)))
	require.NoError(t, c.WaitSockets(ctxWithTimeout(t), 1))

	require.NoError(t, c.Interrupt())
	frames := readFrames(t, conn, 4)
	assert.Equal(t, KindAgentErrorEvent, frames[0]["kind"])
	assert.Equal(t, pending["tool_call_id"], frames[0]["tool_call_id"])
	assert.Equal(t, map[string]any{"kind": "agent_action", "retryable": true, "user_action": "retry"}, frames[0]["classification"])
	assert.Equal(t, StatusPaused, frames[1]["value"])
	assert.Equal(t, KindInterruptEvent, frames[2]["kind"])
	assert.True(t, isFullState(frames[3]))
	assert.Equal(t, StatusPaused, frames[3]["value"].(map[string]any)["execution_status"])
}

func TestRecording(t *testing.T) {
	s := Start(t, Config{SessionAPIKeys: []string{testKey}})
	c := newConversation(t, s, ConversationOptions{})
	api := newAPIClient(t, s, testKey)
	api.getJSON("/api/conversations/search")
	conn := mustDial(t, s, EndpointEvents, c.ID(), url.Values{"resend_mode": {"all"}})
	sendAuth(t, conn, testKey)
	require.True(t, isFullState(readFrame(t, conn)))

	assert.Empty(t, s.Writes(), "reads only so far")
	for _, f := range s.InboundFrames() {
		assert.True(t, f.IsAuth(), "only auth frames so far")
	}
	requests := s.Requests()
	require.Len(t, requests, 2)
	assert.Equal(t, "/api/conversations/search", requests[0].Path)
	assert.Equal(t, http.StatusOK, requests[0].Status)
	assert.Equal(t, "/sockets/events/"+c.ID(), requests[1].Path)
	assert.Equal(t, "resend_mode=all", requests[1].RawQuery)
	assert.Equal(t, http.StatusSwitchingProtocols, requests[1].Status)

	status, _ := api.do(http.MethodPost, "/api/conversations/"+c.ID()+"/pause", nil)
	require.Equal(t, http.StatusOK, status)
	status, _ = api.do(http.MethodPost, "/api/conversations/"+c.ID()+"/events", map[string]any{"content": []any{}})
	require.Equal(t, http.StatusOK, status)
	writes := s.Writes()
	require.Len(t, writes, 2)
	assert.Equal(t, "/api/conversations/"+c.ID()+"/pause", writes[0].Path)
	assert.Equal(t, http.MethodPost, writes[1].Method)
	assert.JSONEq(t, `{"content":[]}`, string(writes[1].Body))

	s.ResetRecording()
	assert.Empty(t, s.Requests())
	assert.Empty(t, s.InboundFrames())
}

func TestStartConversationREST(t *testing.T) {
	s := Start(t, Config{})
	api := newAPIClient(t, s, "")
	id := NewUUID()
	body := map[string]any{
		"conversation_id": id,
		"workspace":       map[string]any{"working_dir": "/tmp/ws"},
		"initial_message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "go"}}},
	}
	status, raw := api.do(http.MethodPost, "/api/conversations", body)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	var info map[string]any
	require.NoError(t, json.Unmarshal(raw, &info))
	assert.Equal(t, id, info["id"])
	assert.Equal(t, StatusRunning, info["execution_status"], "the initial message always runs")
	status, _ = api.do(http.MethodPost, "/api/conversations", body)
	assert.Equal(t, http.StatusOK, status, "an existing id answers 200")
}

func TestWithoutSessionSocket(t *testing.T) {
	s := Start(t, Config{WithoutSessionSocket: true})
	c, err := s.CreateConversation(ConversationOptions{})
	require.NoError(t, err)
	_, resp, err := websocket.DefaultDialer.Dial("ws://"+s.Addr()+"/sockets/session/"+c.ID(), nil)
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()
	conn, resp, err := websocket.DefaultDialer.Dial("ws://"+s.Addr()+"/sockets/events/"+c.ID(), nil)
	require.NoError(t, err, "the legacy socket stays")
	resp.Body.Close()
	conn.Close()
}

// PATCH /api/conversations/{id} as update_conversation does on 1.58.2: a
// title is stored metadata, no event; tags are a state field, so a change
// is a stored ConversationStateUpdateEvent(key=tags), and the same tags
// again record nothing.
func TestUpdateConversation(t *testing.T) {
	s := Start(t, Config{})
	conv := newConversation(t, s, ConversationOptions{})
	api := newAPIClient(t, s, "")
	patch := func(body map[string]any) int {
		status, _ := api.do(http.MethodPatch, "/api/conversations/"+conv.ID(), body)
		return status
	}
	require.Equal(t, http.StatusOK, patch(map[string]any{"title": "  renamed "}))
	assert.Equal(t, "renamed", api.getJSON("/api/conversations/" + conv.ID())["title"])
	assert.Empty(t, conv.Events(), "a rename records no event")

	require.Equal(t, http.StatusOK, patch(map[string]any{"tags": map[string]any{"team": "infra"}}))
	require.Equal(t, http.StatusOK, patch(map[string]any{"tags": map[string]any{"team": "infra"}}))
	evs := conv.Events()
	require.Len(t, evs, 1, "one state update: the same tags again change nothing")
	assert.Equal(t, KindConversationStateUpdateEvent, evs[0].Kind())
	assert.Equal(t, "tags", evs[0]["key"])
	assert.Equal(t, map[string]any{"team": "infra"}, evs[0]["value"])
	assert.Equal(t, map[string]any{"team": "infra"}, api.getJSON("/api/conversations/" + conv.ID())["tags"])

	assert.Equal(t, http.StatusUnprocessableEntity, patch(map[string]any{"title": ""}))
	status, _ := api.do(http.MethodPatch, "/api/conversations/"+NewUUID(), map[string]any{"title": "x"})
	assert.Equal(t, http.StatusNotFound, status)
}
