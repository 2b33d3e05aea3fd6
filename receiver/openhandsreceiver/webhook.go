package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// The agent server's webhook wire (agent_server/conversation_service.py,
// WebhookSubscriber and ConversationWebhookSubscriber): event batches, a
// JSON list of model_dump(mode="json") events, to
// {base_url}/events/{conversation id as 32 hex digits}; ConversationInfo
// snapshots to {base_url}/conversations; the server's first session key in
// X-Session-API-Key. base_url may carry a path: only the last segments are
// read.
const (
	sessionKeyHeader  = "X-Session-API-Key"
	conversationsPath = "/conversations"
	eventsSegment     = "/events/"
)

// Outcomes of a webhook POST (otelcol_openhands_webhook_requests).
const (
	hookAccepted     = "accepted"
	hookUnauthorized = "unauthorized"
	hookMalformed    = "malformed"
	hookTooLarge     = "too_large"
	hookNotFound     = "not_found"
)

// webhookSink serves the agent servers' webhook POSTs and hands each to
// the watch of the server whose key it carries.
type webhookSink struct {
	watches []*serverWatch
	tel     *telemetry
	rl      *ratelog.Logger
	maxBody int64
	stopped <-chan struct{} // closed when the watches stop: nobody takes a push

	server *http.Server
	addr   net.Addr
	served sync.WaitGroup
}

// startWebhook opens the webhook listener.
func (r *openhandsReceiver) startWebhook(ctx context.Context, host component.Host, watches []*serverWatch, stopped <-chan struct{}) (*webhookSink, error) {
	cfg := r.cfg.Webhook.Get().ServerConfig // ToServer fills in the default body limit: read it from the copy
	sink := &webhookSink{watches: watches, tel: r.tel, rl: ratelog.New(r.set.Logger, logEvery), stopped: stopped}
	srv, err := cfg.ToServer(ctx, host.GetExtensions(), r.set.TelemetrySettings, sink)
	if err != nil {
		return nil, fmt.Errorf("webhook: build the HTTP server: %w", err)
	}
	sink.maxBody = cfg.MaxRequestBodySize
	ln, err := cfg.ToListener(ctx)
	if err != nil {
		return nil, fmt.Errorf("webhook: listen on %s: %w", cfg.NetAddr.Endpoint, err)
	}
	sink.server, sink.addr = srv, ln.Addr()
	sink.served.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	})
	r.set.Logger.Info("webhook sink listening", zap.Stringer("address", ln.Addr()))
	return sink, nil
}

func (h *webhookSink) shutdown(ctx context.Context) error {
	err := h.server.Shutdown(ctx)
	h.served.Wait()
	if err != nil {
		return fmt.Errorf("webhook: shutdown: %w", err)
	}
	return nil
}

func (h *webhookSink) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	if req.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		http.Error(rw, "POST only", http.StatusMethodNotAllowed)
		return
	}
	w := h.serverOf(req.Header.Get(sessionKeyHeader))
	if w == nil {
		h.tel.webhookRequest(ctx, "", hookUnauthorized)
		h.rl.Warn("webhook-auth", "refused a webhook POST without a configured server's session key",
			zap.String("remote", req.RemoteAddr), zap.Bool("key_present", req.Header.Get(sessionKeyHeader) != ""))
		http.Error(rw, "unknown session key", http.StatusUnauthorized)
		return
	}
	kind, id, ok := route(req.URL.Path)
	if !ok {
		h.tel.webhookRequest(ctx, w.api.name, hookNotFound)
		http.Error(rw, "not a webhook path (want .../events/{id} or .../conversations)", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(req.Body)
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
		h.refuse(ctx, rw, w, hookTooLarge, http.StatusRequestEntityTooLarge,
			fmt.Errorf("the body is larger than webhook.max_request_body_size (%d bytes)", h.maxBody))
		return
	} else if err != nil {
		h.refuse(ctx, rw, w, hookMalformed, http.StatusBadRequest, fmt.Errorf("read the body: %w", err))
		return
	}
	p, err := decodePush(kind, id, body)
	if err != nil {
		h.refuse(ctx, rw, w, hookMalformed, http.StatusBadRequest, err)
		return
	}
	if w.shard.owns(p.id) {
		if err := w.push(ctx, h.stopped, p); err != nil {
			http.Error(rw, "not taken in: the receiver is stopping or the request ended", http.StatusServiceUnavailable)
			return
		}
	}
	h.tel.webhookRequest(ctx, w.api.name, hookAccepted)
	rw.WriteHeader(http.StatusOK)
}

// refuse answers a POST that is not taken in; the server retries it
// num_retries times, then drops it, and its events come from the socket or
// (webhook.only) the next backfill. The log names the server and the
// reason, never the body.
func (h *webhookSink) refuse(ctx context.Context, rw http.ResponseWriter, w *serverWatch, outcome string, status int, err error) {
	h.tel.webhookRequest(ctx, w.api.name, outcome)
	w.rl.Warn("webhook:"+outcome, "refused a webhook POST; the server retries it, then drops it; its events still come from the socket or a backfill",
		zap.String("outcome", outcome), zap.Error(err))
	http.Error(rw, err.Error(), status)
}

// serverOf returns the watch of the server whose session key is key, nil
// if none. Every key is compared, in constant time, whatever matches.
func (h *webhookSink) serverOf(key string) *serverWatch {
	var found *serverWatch
	for _, w := range h.watches {
		if subtle.ConstantTimeCompare([]byte(key), []byte(w.api.key)) == 1 && key != "" {
			found = w
		}
	}
	return found
}

type pushKind int

const (
	pushInfo   pushKind = iota // a ConversationInfo snapshot
	pushEvents                 // an event batch
)

// route reads a webhook path: kind, and for an event batch the id as sent.
func route(path string) (kind pushKind, id string, ok bool) {
	if strings.HasSuffix(path, conversationsPath) {
		return pushInfo, "", true
	}
	i := strings.LastIndex(path, eventsSegment)
	if i < 0 {
		return 0, "", false
	}
	id = path[i+len(eventsSegment):]
	return pushEvents, id, id != "" && !strings.Contains(id, "/")
}

// push is one webhook POST, decoded, on its way to its server's watch.
type push struct {
	id     string
	info   *conversationInfo // pushInfo
	meta   metadata          // pushInfo
	events []any             // pushEvents: each as aep.DecodeValue decodes it
	reply  chan *conversation
}

// metadata is what a ConversationInfo shows and no event does: a title
// rename changes stored metadata without any event. Tags are not here:
// they are a state field (1.58.2), so the socket's full_state shows them
// and a change is a stored ConversationStateUpdateEvent(key=tags), mapped
// like any state update; taking them from the push too announced each
// change twice.
type metadata struct {
	Title json.RawMessage `json:"title"`
}

// decodePush decodes a POST body: a ConversationInfo object, or a JSON
// list of events (each one checked as it is processed).
func decodePush(kind pushKind, pathID string, body []byte) (push, error) {
	if kind == pushInfo {
		var item searchItem // the same checks as a search item
		if err := json.Unmarshal(body, &item); err != nil {
			return push{}, fmt.Errorf("not a ConversationInfo: %w", err)
		}
		if item.err != nil {
			return push{}, item.err
		}
		var meta metadata
		_ = json.Unmarshal(body, &meta) // it decoded as an object above
		return push{id: item.info.ID, info: &item.info, meta: meta}, nil
	}
	id, ok := mapping.ConversationID(pathID)
	if !ok {
		return push{}, fmt.Errorf("path id %s is not a conversation id", quoteID(pathID))
	}
	v, err := aep.DecodeValue(body)
	if err != nil {
		return push{}, fmt.Errorf("not JSON: %w", err)
	}
	events, ok := v.([]any)
	if !ok {
		return push{}, errors.New("not a JSON list of events")
	}
	return push{id: id, events: events}, nil
}

// errStopped: the watches have stopped and take no push.
var errStopped = errors.New("the receiver is stopping")

// push hands p to the watch goroutine, waits until it has the conversation
// under observation, and then takes p's contents in.
func (w *serverWatch) push(ctx context.Context, stopped <-chan struct{}, p push) error {
	p.reply = make(chan *conversation, 1)
	select {
	case w.pushes <- p:
	case <-stopped:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	var c *conversation
	select {
	case c = <-p.reply:
	case <-stopped:
		return errStopped
	}
	if c == nil {
		return nil // ended, or not to be observed: nothing to take in
	}
	if p.info != nil {
		c.session.noteMetadata(ctx, p.info.UpdatedAt, p.meta)
	} else {
		c.takePushed(ctx, p.events)
	}
	return nil
}

// pushed is the watch goroutine's part of a push: the conversation it
// names is observed now, not at the next poll, and returned (nil if it is
// not to be observed). A ConversationInfo is observed as if search listed
// it (status deleting ends the session); an event batch for a
// conversation not attached is looked up by id first. A new conversation
// starts its session and attaches if a slot is free; else it waits,
// queued, as the poll's own overflow does.
func (w *serverWatch) pushed(ctx context.Context, p push) *conversation {
	if p.info != nil {
		w.noteChild(ctx, *p.info) // a pushed child's stop reaches its parent now
	}
	if w.ended.Has(p.id) {
		return nil
	}
	info := p.info
	if c, known := w.convs[p.id]; info == nil && known && (c.attached() || w.sessions.pushOnly) {
		return c
	}
	if info == nil {
		looked, err := w.api.conversation(ctx, p.id)
		if err != nil {
			w.rl.Warn("push-lookup", "cannot look up a conversation the webhook named; the next poll finds it",
				zap.String("conversation", p.id), zap.Error(err))
			return w.convs[p.id]
		}
		info = &looked
	}
	w.take(ctx, *info)
	if _, queued := w.waiting[p.id]; queued && w.freeSlots() > 0 {
		delete(w.waiting, p.id)
		w.attachOne(ctx, *info)
	}
	return w.convs[p.id]
}

// takePushed takes in an event batch the server pushed. With sockets, an
// event that extends what was processed (its parent_id names a processed
// event, or it is the conversation's first) is mapped at once, and the
// socket's copy is a repeat; any other is left to the socket, which
// delivers every stored event in log order: mapping it now could put it
// before events the socket has not delivered yet. Transient events (state
// snapshots, deltas) are the socket's: they carry no parent and no seq.
//
// With webhook.only the batch is preceded by a backfill from events/search
// (from the resume margin before the newest event processed): the server
// drops the oldest events under pressure, and a dropped state update
// breaks no parent chain, so only reading the log shows every gap. The
// pushed events then repeat what the backfill read, or follow it.
func (c *conversation) takePushed(ctx context.Context, events []any) {
	only := c.session.pushOnly
	if only {
		c.only.mu.Lock()
		defer c.only.mu.Unlock()
		c.backfillLocked(ctx)
	}
	undecodable := 0
	for _, item := range events {
		ev, err := mapping.EventOf(item)
		if err != nil {
			undecodable++
			continue
		}
		c.session.count(ctx, ev)
		if only || !ev.Transient() && c.session.extends(ev) {
			c.session.process(ctx, ev, webhookPush, false)
		}
	}
	c.session.flush(ctx)
	if undecodable > 0 {
		c.tel.decodeError(ctx, "webhook_event")
		c.rl.Warn("webhook-decode:"+c.id, "a webhook batch held events that cannot be decoded; the socket or the backfill reads them",
			zap.String("conversation", c.id), zap.Int("events", undecodable))
	}
}

// onlyState orders, with webhook.only, a conversation's backfills and
// pushed batches: each runs whole before the next, so events are
// processed in log order.
type onlyState struct {
	mu         sync.Mutex
	backfilled conversationInfo // what search showed at the last backfill
}

// backfill reads, with webhook.only, the stored events the pushes may not
// have brought: all of them at first sight, then, each time discovery
// shows the conversation moved since the last backfill, from the resume
// margin before the newest processed (a dropped event at the end of the
// log breaks no parent chain).
func (c *conversation) backfill(ctx context.Context, info conversationInfo) {
	c.only.mu.Lock()
	defer c.only.mu.Unlock()
	if c.only.backfilled == info {
		return
	}
	if c.backfillLocked(ctx) {
		c.only.backfilled = info
	}
}

// backfillLocked pages events/search like a legacy attach's history,
// deduplicated by vendor id, and reports whether it read all.
func (c *conversation) backfillLocked(ctx context.Context) bool {
	if err := c.replayHistory(ctx); err != nil {
		c.rl.Warn("backfill:"+c.id, "cannot read the conversation's events over REST; the next push or poll tries again",
			zap.String("conversation", c.id), zap.Error(err))
		return false
	}
	return true
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// isEmptyJSON: null, "", {} or [].
func isEmptyJSON(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}
