package openhandstest

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartChildConversation(t *testing.T) {
	s := Start(t, Config{})
	parent := newConversation(t, s, ConversationOptions{WorkingDir: "/w/p"})
	api := newAPIClient(t, s, "")

	status, body := api.do(http.MethodPost, "/api/conversations/"+parent.ID()+"/children", map[string]any{"task": "write the tests", "title": "tests"})
	require.Equal(t, http.StatusCreated, status, string(body))
	var launch ChildLaunch
	require.NoError(t, json.Unmarshal(body, &launch))
	assert.Equal(t, parent.ID(), launch.ParentConversationID)
	assert.Equal(t, StatusIdle, launch.Status, "the status as the launch read it, before the run loop starts")
	assert.Equal(t, StatusRunning, api.getJSON("/api/conversations/" + launch.ConversationID)["execution_status"], "the task is sent with run=true")
	assert.Equal(t, "shared", launch.Isolation)
	assert.Equal(t, "/w/p", launch.Workspace)

	child := api.getJSON("/api/conversations/" + launch.ConversationID)
	assert.Equal(t, parent.ID(), child["parent_conversation_id"])
	assert.Equal(t, "tests", child["title"])
	assert.Equal(t, []any{launch.ConversationID}, api.getJSON("/api/conversations/" + parent.ID())["sub_conversation_ids"])

	t.Run("task required", func(t *testing.T) {
		status, _ := api.do(http.MethodPost, "/api/conversations/"+parent.ID()+"/children", map[string]any{"title": "x"})
		assert.Equal(t, http.StatusUnprocessableEntity, status)
	})
	t.Run("unknown parent", func(t *testing.T) {
		status, body := api.do(http.MethodPost, "/api/conversations/"+NewUUID()+"/children", map[string]any{"task": "x"})
		assert.Equal(t, http.StatusNotFound, status)
		assert.JSONEq(t, `{"detail":"Parent conversation not found"}`, string(body))
	})
}

func TestForkConversation(t *testing.T) {
	s := Start(t, Config{})
	source := newConversation(t, s, ConversationOptions{Status: StatusFinished})
	// A state update carries parent_id but is no event of the branch.
	events := appendAll(t, source, MessageEvent("user", "one"), StateUpdateEvent("execution_status", StatusFinished), MessageEvent("user", "two"))
	api := newAPIClient(t, s, "")

	for _, tc := range []struct {
		name string
		req  map[string]any
		at   any
		want []Event
	}{
		{"the whole conversation", map[string]any{}, nil, events},
		{"up to and including an event", map[string]any{"from_event_id": events[0].ID()}, events[0].ID(), events[:1]},
		{"the branch to an event, without state updates", map[string]any{"from_event_id": events[2].ID()}, events[2].ID(), []Event{events[0], events[2]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := api.do(http.MethodPost, "/api/conversations/"+source.ID()+"/fork", tc.req)
			require.Equal(t, http.StatusCreated, status, string(body))
			var info map[string]any
			require.NoError(t, json.Unmarshal(body, &info))
			assert.Equal(t, source.ID(), info["forked_from_conversation_id"])
			assert.Equal(t, tc.at, info["forked_from_event_id"])
			assert.Nil(t, info["parent_conversation_id"])
			assert.Equal(t, StatusIdle, info["execution_status"])
			fork, ok := s.Conversation(info["id"].(string))
			require.True(t, ok)
			assert.Equal(t, eventIDs(tc.want), eventIDs(fork.Events()), "the same event ids")
		})
	}
	t.Run("unknown event", func(t *testing.T) {
		status, _ := api.do(http.MethodPost, "/api/conversations/"+source.ID()+"/fork", map[string]any{"from_event_id": NewUUID()})
		assert.Equal(t, http.StatusNotFound, status)
	})
}

// TestStartChildObservation: the tool's observation as the 1.58.2 server
// persisted it in the live test (tools/child_conversation/impl.py: the
// summary line, then the launch response as indented JSON; a null field
// such as url left off the observation).
func TestStartChildObservation(t *testing.T) {
	const recorded = `{
		"content": [{"cache_prompt": false, "type": "text",
			"text": "Started child conversation 10ce8c44-e7e3-4726-85e2-ba43dc5a5784 (status: idle).\n{\n  \"conversation_id\": \"10ce8c44-e7e3-4726-85e2-ba43dc5a5784\",\n  \"parent_conversation_id\": \"9a25f5fe-a203-42fe-ae2a-b7dff387c58b\",\n  \"status\": \"idle\",\n  \"title\": \"file counter\",\n  \"url\": null,\n  \"workspace\": \"/tmp/TestLiveTree1644619858/001/workspace/tree_parent\",\n  \"isolation\": \"shared\"\n}"}],
		"conversation_id": "10ce8c44-e7e3-4726-85e2-ba43dc5a5784",
		"is_error": false,
		"isolation": "shared",
		"kind": "StartChildConversationObservation",
		"parent_conversation_id": "9a25f5fe-a203-42fe-ae2a-b7dff387c58b",
		"status": "idle",
		"title": "file counter",
		"workspace": "/tmp/TestLiveTree1644619858/001/workspace/tree_parent"
	}`
	ev := StartChildObservation(StartChildAction("count the files", "file counter"), ChildLaunch{
		ConversationID: "10ce8c44-e7e3-4726-85e2-ba43dc5a5784", ParentConversationID: "9a25f5fe-a203-42fe-ae2a-b7dff387c58b",
		Status: StatusIdle, Title: "file counter", Workspace: "/tmp/TestLiveTree1644619858/001/workspace/tree_parent", Isolation: "shared",
	})
	built, err := json.Marshal(ev["observation"])
	require.NoError(t, err)
	assert.JSONEq(t, recorded, string(built))
}
