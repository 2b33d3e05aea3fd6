package openhandstest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hookSink records the webhook POSTs; fail makes the next n answer 503.
type hookSink struct {
	mu       sync.Mutex
	fail     int
	posts    []hookPost
	received chan struct{}
}

type hookPost struct {
	path, key, custom string
	body              []byte
}

func startHookSink(t *testing.T) (*hookSink, string) {
	t.Helper()
	k := &hookSink{received: make(chan struct{}, 1000)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		k.mu.Lock()
		failing := k.fail > 0
		if failing {
			k.fail--
		} else {
			k.posts = append(k.posts, hookPost{r.URL.Path, r.Header.Get("X-Session-API-Key"), r.Header.Get("X-Custom"), body})
		}
		k.mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		k.received <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return k, srv.URL + "/hook"
}

// waitPosts waits for n more posts and returns all so far.
func (k *hookSink) waitPosts(t *testing.T, n int) []hookPost {
	t.Helper()
	for range n {
		select {
		case <-k.received:
		case <-time.After(waitTimeout):
			t.Fatalf("webhook posts: want %d, timed out", n)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]hookPost(nil), k.posts...)
}

func batchIDs(t *testing.T, body []byte) []string {
	t.Helper()
	var events []map[string]any
	require.NoError(t, json.Unmarshal(body, &events))
	ids := make([]string, 0, len(events))
	for _, ev := range events {
		ids = append(ids, ev["id"].(string))
	}
	return ids
}

// infoPosted waits for a ConversationInfo of conversation id among the
// posts from *next on, returns it and moves *next past it.
func infoPosted(t *testing.T, k *hookSink, next *int, id string) map[string]any {
	t.Helper()
	for {
		posts := k.waitPosts(t, 0)
		for ; *next < len(posts); *next++ {
			var info map[string]any
			if p := posts[*next]; p.path == "/hook/conversations" && json.Unmarshal(p.body, &info) == nil && info["id"] == id {
				*next++
				return info
			}
		}
		k.waitPosts(t, 1)
	}
}

func TestWebhooks(t *testing.T) {
	sink, base := startHookSink(t)
	spec := WebhookSpec{BaseURL: base, Headers: map[string]string{"X-Custom": "c"}, EventBufferSize: 2, FlushDelay: time.Hour, MaxQueueSize: 3}
	s := Start(t, Config{SessionAPIKeys: []string{testKey, "second"}, Webhooks: []WebhookSpec{spec}})
	conv, err := s.CreateConversation(ConversationOptions{Title: "first"})
	require.NoError(t, err)

	posts := sink.waitPosts(t, 1)
	assert.Equal(t, "/hook/conversations", posts[0].path, "start posts the ConversationInfo")
	assert.Equal(t, testKey, posts[0].key, "the server's first session key")
	assert.Equal(t, "c", posts[0].custom, "the configured headers")

	var ids []string
	appendMessages := func(n int) {
		for range n {
			ev, err := conv.Append(MessageEvent("user", "hi"))
			require.NoError(t, err)
			ids = append(ids, ev.ID())
		}
	}
	appendMessages(1)
	posts = sink.waitPosts(t, 1)
	assert.Equal(t, "/hook/events/"+conv.HexID(), posts[1].path)
	first := batchIDs(t, posts[1].body)
	require.Len(t, first, 2)
	assert.Contains(t, string(posts[1].body), `"key":"full_state"`, "the subscription starts with the state snapshot")
	assert.Equal(t, ids, first[1:], "a full buffer posts at once, in order")
	appendMessages(2)
	posts = sink.waitPosts(t, 1)
	assert.Equal(t, ids[1:], batchIDs(t, posts[2].body))
	assert.Contains(t, string(posts[2].body), `"parent_id"`, "model_dump keeps parent_id")

	conv.SetTitle("renamed")
	posts = sink.waitPosts(t, 1)
	assert.Equal(t, "/hook/conversations", posts[3].path)
	assert.Contains(t, string(posts[3].body), `"renamed"`)

	t.Run("the tree on ConversationInfo", func(t *testing.T) {
		sink, base := startHookSink(t) // the child's run posts more than this subtest waits for
		s := Start(t, Config{Webhooks: []WebhookSpec{{BaseURL: base, FlushDelay: time.Hour}}})
		parent, err := s.CreateConversation(ConversationOptions{})
		require.NoError(t, err)
		next := len(sink.waitPosts(t, 1)) // after the parent's start
		launch, err := parent.StartChild("write the tests", "")
		require.NoError(t, err)
		child := infoPosted(t, sink, &next, launch.ConversationID)
		assert.Equal(t, parent.ID(), child["parent_conversation_id"], "the child's start names its parent")
		parent.SetTitle("renamed")
		assert.Equal(t, []any{}, infoPosted(t, sink, &next, parent.ID())["sub_conversation_ids"],
			"the catalog's children are left out of webhook payloads")
	})

	t.Run("drop oldest, then retry", func(t *testing.T) {
		s := Start(t, Config{Webhooks: []WebhookSpec{{BaseURL: base, EventBufferSize: 10, FlushDelay: time.Hour, MaxQueueSize: 3, NumRetries: 2}}})
		conv, err := s.CreateConversation(ConversationOptions{})
		require.NoError(t, err)
		sink.waitPosts(t, 1) // the start
		var ids []string
		for range 4 {
			ev, err := conv.Append(MessageEvent("user", "x"))
			require.NoError(t, err)
			ids = append(ids, ev.ID())
		}
		sink.mu.Lock()
		sink.fail = 2 // two attempts fail, the third of num_retries+1 gets through
		sink.mu.Unlock()
		require.NoError(t, conv.Delete()) // closing the event service posts what is queued
		var got []string
		for _, p := range sink.waitPosts(t, 2) {
			if strings.Contains(p.path, conv.HexID()) {
				got = append(got, batchIDs(t, p.body)...)
			}
		}
		assert.Equal(t, ids[1:], got, "past max_queue_size the oldest (the state snapshot, then the first event) are dropped")
		want := WebhookStats{Batches: 1, Infos: 2, Failed: 2, Dropped: 2}
		require.Eventually(t, func() bool { return s.WebhookStats() == want }, waitTimeout, 10*time.Millisecond,
			"counted once each POST returned")
	})
}
