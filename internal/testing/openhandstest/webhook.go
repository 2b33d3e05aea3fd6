package openhandstest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// WebhookSpec is the server's WebhookSpec (agent_server/config.py): where
// and how it pushes. Zero EventBufferSize, FlushDelay and MaxQueueSize take
// the server's defaults (5, 30 s, 1000); NumRetries and RetryDelay are
// taken as given, 0 included (the server's defaults are 3 and 5 s).
type WebhookSpec struct {
	// BaseURL: event batches go to {BaseURL}/events/{conversation hex id},
	// ConversationInfo snapshots to {BaseURL}/conversations.
	BaseURL string
	// Headers are sent with every POST, besides X-Session-API-Key (the
	// server's first session key).
	Headers         map[string]string
	EventBufferSize int
	FlushDelay      time.Duration
	NumRetries      int
	RetryDelay      time.Duration
	MaxQueueSize    int
}

func (w WebhookSpec) withDefaults() WebhookSpec {
	if w.EventBufferSize <= 0 {
		w.EventBufferSize = 5
	}
	if w.FlushDelay <= 0 {
		w.FlushDelay = 30 * time.Second
	}
	if w.MaxQueueSize <= 0 {
		w.MaxQueueSize = 1000
	}
	return w
}

// WebhookStats counts what the webhooks did, over all conversations.
type WebhookStats struct {
	// Batches and Infos are the event batches and ConversationInfo
	// snapshots accepted (2xx); Failed the POST attempts that were not.
	Batches, Infos, Failed int
	// Dropped are the events dropped oldest-first past MaxQueueSize.
	Dropped int
}

// webhooks is the server's webhook state: one event subscriber per
// (conversation, spec), as EventService subscribes a WebhookSubscriber per
// spec, and the in-flight POSTs the server waits for on Close.
type webhooks struct {
	client *http.Client
	ctx    context.Context // cancelled by Close: a POST or retry wait in flight ends
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	stats  WebhookStats
}

func newWebhooks() *webhooks {
	ctx, cancel := context.WithCancel(context.Background())
	return &webhooks{client: &http.Client{Timeout: 30 * time.Second}, ctx: ctx, cancel: cancel}
}

func (h *webhooks) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// spawn runs f in the background unless the server is closed.
func (h *webhooks) spawn(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.wg.Go(f)
}

func (h *webhooks) count(f func(*WebhookStats)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.stats)
}

// post sends body to url with the server's retry logic
// (WebhookSubscriber._post_batch, ConversationWebhookSubscriber
// .post_conversation_info): num_retries+1 attempts, retry_delay apart; any
// status but 2xx is a failure.
func (h *webhooks) post(spec WebhookSpec, key, url string, body []byte) bool {
	for attempt := 0; attempt <= spec.NumRetries; attempt++ {
		if h.postOnce(spec, key, url, body) {
			return true
		}
		h.count(func(s *WebhookStats) { s.Failed++ })
		if attempt == spec.NumRetries {
			break
		}
		select {
		case <-h.ctx.Done():
			return false
		case <-time.After(spec.RetryDelay):
		}
	}
	return false
}

func (h *webhooks) postOnce(spec WebhookSpec, key, url string, body []byte) bool {
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	for k, v := range spec.Headers {
		req.Header.Set(k, v)
	}
	if key != "" {
		req.Header.Set("X-Session-API-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode/100 == 2
}

// webhookKey is the key the server sends: its first session key.
func (s *Server) webhookKey() string {
	if len(s.cfg.SessionAPIKeys) == 0 {
		return ""
	}
	return s.cfg.SessionAPIKeys[0]
}

// postInfoLocked posts c's ConversationInfo to every webhook, in the
// background and without batching, as _notify_conversation_webhooks does
// on start, pause, interrupt, delete and update. status, when set,
// overrides execution_status (delete posts "deleting"). Its
// sub_conversation_ids are empty: the server derives them from its
// catalog for REST only (brief §E.3).
func (s *Server) postInfoLocked(c *conversation, status string) {
	if len(s.cfg.Webhooks) == 0 {
		return
	}
	info := s.conversationInfoLocked(c)
	info["sub_conversation_ids"] = []any{}
	if status != "" {
		info["execution_status"] = status
	}
	body, err := marshalJSON(info)
	if err != nil {
		return
	}
	key := s.webhookKey()
	for _, spec := range s.cfg.Webhooks {
		spec := spec.withDefaults()
		s.hooks.spawn(func() {
			if s.hooks.post(spec, key, strings.TrimRight(spec.BaseURL, "/")+"/conversations", body) {
				s.hooks.count(func(st *WebhookStats) { st.Infos++ })
			}
		})
	}
}

// webhookSubscriber is WebhookSubscriber: it queues every event published
// to its conversation (model_dump, parent_id kept) and posts them in
// batches of event_buffer_size, or whatever is queued flush_delay after the
// first event queued; a failed batch is put back in front, and past
// max_queue_size the oldest events are dropped.
type webhookSubscriber struct {
	hooks *webhooks
	spec  WebhookSpec
	key   string
	url   string

	mu      sync.Mutex
	queue   [][]byte
	timer   *time.Timer
	posting bool
	// flushDue: the flush timer fired during a post; like the server's,
	// which waits for the post lock, it flushes once the post is done.
	flushDue bool
}

func (s *Server) newWebhookSubscribers(c *conversation) []*webhookSubscriber {
	subs := make([]*webhookSubscriber, 0, len(s.cfg.Webhooks))
	for _, spec := range s.cfg.Webhooks {
		spec = spec.withDefaults()
		subs = append(subs, &webhookSubscriber{
			hooks: s.hooks, spec: spec, key: s.webhookKey(),
			url: fmt.Sprintf("%s/events/%s", strings.TrimRight(spec.BaseURL, "/"), hexID(c.id)),
		})
	}
	return subs
}

// subscribeWebhooksLocked is what EventService.subscribe_to_events sends
// each webhook subscriber first: the current full_state snapshot. A fork,
// which the server announces otherwise to no webhook, is first seen in
// that batch, flush_delay later.
func (s *Server) subscribeWebhooksLocked(c *conversation) {
	if len(c.webhooks) == 0 {
		return
	}
	pub, err := s.fullStateLocked(c)
	if err != nil {
		return
	}
	for _, w := range c.webhooks {
		w.enqueue(pub.raw)
	}
}

// enqueue is WebhookSubscriber.__call__.
func (w *webhookSubscriber) enqueue(raw []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, raw)
	w.trimLocked()
	switch {
	case len(w.queue) >= w.spec.EventBufferSize && !w.posting:
		w.stopTimerLocked()
		w.startPostLocked()
	case len(w.queue) > 0:
		w.startTimerLocked()
	}
}

// trimLocked is _trim_queue: drop the oldest past max_queue_size.
func (w *webhookSubscriber) trimLocked() {
	if over := len(w.queue) - w.spec.MaxQueueSize; over > 0 {
		w.queue = w.queue[over:]
		w.hooks.count(func(s *WebhookStats) { s.Dropped += over })
	}
}

func (w *webhookSubscriber) startTimerLocked() {
	if w.timer == nil {
		w.timer = time.AfterFunc(w.spec.FlushDelay, w.flush)
	}
}

func (w *webhookSubscriber) stopTimerLocked() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// flush is _flush_after_delay: post what is queued, if anything.
func (w *webhookSubscriber) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	switch {
	case len(w.queue) == 0:
	case w.posting:
		w.flushDue = true
	default:
		w.startPostLocked()
	}
}

func (w *webhookSubscriber) startPostLocked() {
	w.posting = true
	w.hooks.spawn(w.postEvents)
}

// postEvents is _post_events: batches of at most event_buffer_size, in
// order, until what was queued at its start is posted (or the buffer
// filled again meanwhile); a failed batch goes back in front and the flush
// timer is armed for it.
func (w *webhookSubscriber) postEvents() {
	w.mu.Lock()
	remaining := len(w.queue)
	for remaining > 0 {
		n := min(w.spec.EventBufferSize, remaining)
		batch := w.queue[:n:n]
		w.queue = w.queue[n:]
		w.mu.Unlock()
		ok := w.hooks.post(w.spec, w.key, w.url, jsonList(batch))
		w.mu.Lock()
		if !ok {
			w.queue = append(batch, w.queue...)
			w.trimLocked()
			if w.hooks.ctx.Err() == nil {
				w.startTimerLocked()
			}
			break
		}
		w.hooks.count(func(s *WebhookStats) { s.Batches++ })
		remaining -= n
		if remaining == 0 && (len(w.queue) >= w.spec.EventBufferSize || w.flushDue) {
			w.flushDue = false
			remaining = len(w.queue)
		}
	}
	if len(w.queue) == 0 {
		w.stopTimerLocked()
	}
	w.posting = false
	w.mu.Unlock()
}

func jsonList(items [][]byte) []byte {
	return append(append([]byte{'['}, bytes.Join(items, []byte{','})...), ']')
}

// WebhookStats returns what the webhooks did so far.
func (s *Server) WebhookStats() WebhookStats {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	return s.hooks.stats
}
