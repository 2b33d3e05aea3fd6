package aeprelaytest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// closeGrace is how long a closing socket waits for the peer's close echo
// before dropping TCP.
const closeGrace = time.Second

var upgrader = websocket.Upgrader{
	HandshakeTimeout: 10 * time.Second,
	// A loopback test relay: browsers of any origin may watch it; commands
	// still need the token.
	CheckOrigin: func(*http.Request) bool { return true },
}

// wsFrame is one item of a socket's outbox: a text frame, or the close
// frame that ends the writer.
type wsFrame struct {
	data      []byte
	closeCode int
	closeText string
}

// wsConn is one accepted socket (AEP-0003 §3.5). Its handler goroutine
// reads; writeLoop is its only data writer.
type wsConn struct {
	r          *Relay
	id         int
	ws         *websocket.Conn
	out        *outbox[wsFrame]
	done       chan struct{} // closed by abort
	abortOnce  sync.Once
	writerDone chan struct{}
	pongs      chan int64 // answers to the relay's pings, for writeLoop
	sentClose  atomic.Bool

	timerMu       sync.Mutex
	timers        map[*time.Timer]struct{} // delayed pongs (SetPong)
	timersStopped bool

	// Guarded by Relay.mu.
	hello   *Hello
	control json.RawMessage // declared capabilities.control, verbatim, for the roster
	emits   json.RawMessage
	closing bool // the relay is closing it: no more deliveries
	leaving bool // the peer sent `closing`: no more commands
	claims  map[sessionKey]struct{}
	subs    map[string]*subscription
}

// subscription is one subscribe of a socket (AEP-0003 §6.5).
type subscription struct {
	id      string
	filter  filter
	ceiling aep.Capture
	// delivered is the last position handed over per session, for the
	// `closing` frame; bounded by MaxSessions.
	delivered map[string]position
}

func (r *Relay) handleSocket(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "unavailable", "detail": "relay is stopping"})
		return
	}
	r.wsWG.Add(1)
	r.mu.Unlock()
	defer r.wsWG.Done()

	ws, err := upgrader.Upgrade(w, req, nil)
	if err != nil {
		return // Upgrade has answered the client
	}
	ws.SetReadLimit(r.cfg.MaxBody)
	c := &wsConn{
		r: r, ws: ws,
		out:        newOutbox[wsFrame](r.cfg.MaxQueued),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
		pongs:      make(chan int64, 1),
		timers:     make(map[*time.Timer]struct{}),
		claims:     make(map[sessionKey]struct{}),
		subs:       make(map[string]*subscription),
	}
	ws.SetPingHandler(func(data string) error {
		c.answerPing(func() {
			_ = ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(r.cfg.WriteTimeout))
		})
		return nil
	})
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		_ = ws.Close()
		return
	}
	r.nextConnID++
	c.id = r.nextConnID
	r.conns[c] = struct{}{}
	r.notifyLocked()
	r.mu.Unlock()
	r.log.Debug("AEP socket opened", "conn", c.id, "remote", req.RemoteAddr)

	c.run()

	r.mu.Lock()
	delete(r.conns, c)
	c.closing = true
	r.notifyLocked()
	r.mu.Unlock()
	r.log.Debug("AEP socket closed", "conn", c.id)
}

// run reads until the connection ends, then stops the writer.
func (c *wsConn) run() {
	go c.writeLoop()
	defer func() {
		c.stopTimers()
		c.abort()
		<-c.writerDone
	}()
	_ = c.ws.SetReadDeadline(time.Now().Add(c.r.cfg.HelloTimeout))
	greeted := false
	for {
		kind, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		switch {
		case c.sentClose.Load():
			// Closing: drain until the peer's close echo.
		case !greeted:
			if greeted = c.greet(kind, data); greeted && !c.sentClose.Load() {
				_ = c.ws.SetReadDeadline(time.Time{})
			}
		default:
			c.handle(kind, data)
		}
	}
}

// abort drops TCP at once, without a close frame.
func (c *wsConn) abort() {
	c.abortOnce.Do(func() {
		close(c.done)
		c.out.close()
		_ = c.ws.Close()
	})
}

// writeLoop is the connection's only data writer: every write has a
// deadline. After the first frame (the hello) it pings, if configured, and
// drops the connection when a pong is late.
func (c *wsConn) writeLoop() {
	defer close(c.writerDone)
	var (
		ticker  *time.Ticker
		tick    <-chan time.Time
		late    *time.Timer
		lateC   <-chan time.Time
		pending int64 // t of the unanswered ping, 0 when none
		lastT   int64
	)
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
		if late != nil {
			late.Stop()
		}
	}()
	for {
		select {
		case <-c.done:
			return
		case <-c.out.ready:
			for _, f := range c.out.take() {
				if f.closeCode != 0 {
					c.writeClose(f.closeCode, f.closeText)
					return
				}
				if err := c.write(f.data); err != nil {
					c.abort()
					return
				}
			}
			if ticker == nil && c.r.cfg.PingInterval > 0 {
				ticker = time.NewTicker(c.r.cfg.PingInterval)
				tick = ticker.C
			}
		case <-tick:
			if pending != 0 {
				continue
			}
			lastT++
			pending = lastT
			if err := c.write([]byte(`{"type":"ping","t":` + strconv.FormatInt(pending, 10) + `}`)); err != nil {
				c.abort()
				return
			}
			late = time.NewTimer(c.r.cfg.PongTimeout)
			lateC = late.C
		case t := <-c.pongs:
			if pending != 0 && t == pending {
				pending = 0
				late.Stop()
				lateC = nil
			}
		case <-lateC:
			c.r.log.Info("AEP socket dropped: pong timeout", "conn", c.id)
			c.abort()
			return
		}
	}
}

func (c *wsConn) write(data []byte) error {
	if err := c.ws.SetWriteDeadline(time.Now().Add(c.r.cfg.WriteTimeout)); err != nil {
		return fmt.Errorf("set write deadline: %w", err)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// writeClose sends the close frame and bounds the wait for its echo.
func (c *wsConn) writeClose(code int, text string) {
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text),
		time.Now().Add(c.r.cfg.WriteTimeout))
	_ = c.ws.SetReadDeadline(time.Now().Add(closeGrace))
}

// closeLocked queues frames, then the close frame; nothing is delivered
// after. Relay.mu must be held.
func (c *wsConn) closeLocked(code int, text string, frames ...[]byte) {
	if c.closing {
		return
	}
	c.closing = true
	c.sentClose.Store(true)
	for _, f := range frames {
		c.out.push(wsFrame{data: f}, false)
	}
	c.out.push(wsFrame{closeCode: code, closeText: text}, false)
	c.out.close()
}

// fail refuses the connection with an error frame and a close.
func (c *wsConn) fail(f ErrorFrame, code int) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.closeLocked(code, f.Code, f.bytes())
}

// shutdownLocked is the relay's orderly close (AEP-0003 §3.5 rule 4):
// `closing` with the delivered positions, then 1001.
func (c *wsConn) shutdownLocked() {
	type delivered struct {
		Sub     string `json:"sub"`
		Session string `json:"session"`
		Epoch   int64  `json:"epoch"`
		Seq     int64  `json:"seq"`
	}
	list := []delivered{}
	for _, id := range slices.Sorted(maps.Keys(c.subs)) {
		s := c.subs[id]
		for _, session := range slices.Sorted(maps.Keys(s.delivered)) {
			p := s.delivered[session]
			list = append(list, delivered{Sub: id, Session: session, Epoch: p.epoch, Seq: p.seq})
		}
	}
	raw, err := json.Marshal(map[string]any{"type": "closing", "reason": "relay shutting down", "delivered": list})
	if err != nil {
		raw = []byte(`{"type":"closing","reason":"relay shutting down","delivered":[]}`)
	}
	c.closeLocked(websocket.CloseGoingAway, "relay shutting down", raw)
}

// answerPing answers a ping as SetPong says.
func (c *wsConn) answerPing(send func()) {
	mode := c.r.pongMode()
	if mode.Agent != "" && (c.hello == nil || c.hello.Agent != mode.Agent) {
		mode = PongMode{}
	}
	switch {
	case mode.Never:
	case mode.Delay > 0:
		c.timerMu.Lock()
		defer c.timerMu.Unlock()
		if c.timersStopped {
			return
		}
		var t *time.Timer
		// The callback takes timerMu first, so t is assigned before it reads it.
		t = time.AfterFunc(mode.Delay, func() {
			c.timerMu.Lock()
			stopped := c.timersStopped
			delete(c.timers, t)
			c.timerMu.Unlock()
			if !stopped {
				send()
			}
		})
		c.timers[t] = struct{}{}
	default:
		send()
	}
}

func (c *wsConn) stopTimers() {
	c.timerMu.Lock()
	defer c.timerMu.Unlock()
	c.timersStopped = true
	for t := range c.timers {
		t.Stop()
	}
	clear(c.timers)
}

// decodeFrame reads a text frame as a JSON object with a string type.
func decodeFrame(kind int, data []byte) (map[string]json.RawMessage, string, error) {
	if kind != websocket.TextMessage {
		return nil, "", errors.New("not a text frame")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return nil, "", errors.New("a frame must be one JSON object")
	}
	var typ string
	if err := json.Unmarshal(fields["type"], &typ); err != nil || typ == "" {
		return nil, "", errors.New("a frame needs a string type")
	}
	return fields, typ, nil
}

// eventFrame tells an Event, most of the traffic, by its type alone, and
// returns it decoded for validation to read; anything else takes
// decodeFrame.
func eventFrame(data []byte) (any, bool) {
	if !bytes.Contains(data, []byte(`"type"`)) {
		return nil, false
	}
	doc, err := aep.DecodeValue(data)
	if err != nil {
		return nil, false
	}
	fields, _ := doc.(map[string]any)
	typ, _ := fields["type"].(string)
	return doc, strings.Contains(typ, ".")
}

// helloFrame is the part of a hello the relay reads (AEP-0003 §4).
type helloFrame struct {
	Versions []string `json:"versions"`
	Role     string   `json:"role"`
	Identity struct {
		Agent    string `json:"agent"`
		Instance string `json:"instance"`
	} `json:"identity"`
	Capabilities struct {
		Control json.RawMessage `json:"control"`
		Emits   json.RawMessage `json:"emits"`
	} `json:"capabilities"`
}

// greet handles the first frame: it must be a hello sharing a version
// with the relay (AEP-0003 §3.5 rule 1, §4 rule 1). It reports whether the
// handshake completed.
func (c *wsConn) greet(kind int, data []byte) bool {
	r := c.r
	_, typ, err := decodeFrame(kind, data)
	if err == nil && typ != "hello" {
		err = fmt.Errorf("first frame is %q", typ)
	}
	if err != nil {
		r.mu.Lock()
		r.protocolViolationLocked(c.id, "hello-required: %v", err)
		r.mu.Unlock()
		c.fail(ErrorFrame{Type: "error", Code: "hello-required", Detail: "the first frame must be hello: " + err.Error()}, websocket.CloseProtocolError)
		return false
	}
	var hf helloFrame
	_ = json.Unmarshal(data, &hf) // fields of the wrong type read as absent
	h := Hello{Conn: c.id, Role: hf.Role, Versions: hf.Versions, Agent: hf.Identity.Agent, Instance: hf.Identity.Instance, Raw: data}
	var control struct {
		Accepts     []string `json:"accepts"`
		AckWindowMS int64    `json:"ack_window_ms"`
	}
	if len(hf.Capabilities.Control) > 0 && json.Unmarshal(hf.Capabilities.Control, &control) == nil {
		h.Accepts, h.AckWindowMS = control.Accepts, control.AckWindowMS
	}
	selected := slices.IndexFunc(h.Versions, func(v string) bool { return slices.Contains(supportedVersions, v) })

	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordFrameLocked(c.id, "hello", data)
	r.st.hellos = appendBounded(r.st.hellos, h, r.cfg.MaxRecords)
	if selected < 0 {
		c.closeLocked(websocket.CloseProtocolError, "version-unsupported", (&ErrorFrame{
			Type: "error", Code: "version-unsupported", Versions: supportedVersions,
			Detail: fmt.Sprintf("no version of %q is supported", h.Versions),
		}).bytes())
		return false
	}
	switch h.Role {
	case "emitter", "consumer", "both":
	default:
		r.protocolViolationLocked(c.id, "hello role %q is not emitter, consumer or both", h.Role)
	}
	if h.Role == "emitter" && h.Agent == "" {
		r.protocolViolationLocked(c.id, "an emitter hello needs identity.agent (AEP-0003 §4 rule 3)")
	}
	c.hello = &h
	c.control, c.emits = hf.Capabilities.Control, hf.Capabilities.Emits
	c.out.push(wsFrame{data: r.helloReply}, false)
	return true
}

// handle dispatches a frame after the handshake: Events go to ingest,
// frames to their handler; unknown frame types are ignored.
func (c *wsConn) handle(kind int, data []byte) {
	r := c.r
	if kind == websocket.BinaryMessage {
		r.mu.Lock()
		r.protocolViolationLocked(c.id, "binary frame (reserved in AEP 0.1)")
		r.mu.Unlock()
		c.fail(ErrorFrame{Type: "error", Code: "binary-frame", Detail: "binary frames are reserved in AEP 0.1"}, websocket.CloseUnsupportedData)
		return
	}
	if doc, ok := eventFrame(data); ok {
		c.handleEvent(data, doc)
		return
	}
	fields, typ, err := decodeFrame(kind, data)
	if err != nil {
		r.mu.Lock()
		r.protocolViolationLocked(c.id, "invalid frame: %v", err)
		r.mu.Unlock()
		c.send(&ErrorFrame{Type: "error", Code: "invalid-frame", Detail: err.Error()})
		return
	}
	if strings.Contains(typ, ".") {
		c.handleEvent(data, nil)
		return
	}
	r.mu.Lock()
	r.recordFrameLocked(c.id, typ, data)
	r.mu.Unlock()
	switch typ {
	case "ping":
		pong := []byte(`{"type":"pong"}`)
		if t, ok := fields["t"]; ok {
			pong = []byte(`{"type":"pong","t":` + string(t) + `}`)
		}
		c.answerPing(func() { c.out.push(wsFrame{data: pong}, false) })
	case "pong":
		if t, err := strconv.ParseInt(string(fields["t"]), 10, 64); err == nil {
			select {
			case c.pongs <- t:
			default:
			}
		}
	case "hello":
		r.mu.Lock()
		r.protocolViolationLocked(c.id, "second hello ignored (one version per connection)")
		r.mu.Unlock()
	case "subscribe":
		c.subscribe(fields)
	case "unsubscribe":
		c.unsubscribe(fields)
	case "roster":
		c.roster(fields)
	case "closing":
		r.mu.Lock()
		c.leaving = true
		r.notifyLocked()
		r.mu.Unlock()
	}
}

func (c *wsConn) send(f *ErrorFrame) { c.out.push(wsFrame{data: f.bytes()}, false) }

// handleEvent ingests an Event frame. An invalid one is refused in-band,
// as the reference relay does: a connection-scoped error frame whose cause
// is the Event's id, queued before anything the relay answers to a later
// frame (the spec leaves this open). The connection stays open.
func (c *wsConn) handleEvent(data []byte, doc any) {
	raw := normalize(data)
	ev, id, err := c.r.admit(raw, doc, BindingSocket, c.id)
	if err != nil {
		c.send(&ErrorFrame{Type: "error", Code: "invalid-event", Cause: id, Detail: err.Error()})
		return
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.ingestLocked(newIngested(raw, ev, BindingSocket, c.id), c)
}

// subscribe handles a subscribe frame (AEP-0003 §6.5): the reply, then
// the replay, then live delivery, all under the relay lock so that no live
// Event slips between them.
func (c *wsConn) subscribe(fields map[string]json.RawMessage) {
	var id string
	_ = json.Unmarshal(fields["id"], &id)
	refuse := func(code, detail string) { c.send(&ErrorFrame{Type: "error", ID: id, Code: code, Detail: detail}) }
	if id == "" {
		refuse("invalid-filter", "subscribe needs a string id")
		return
	}
	sub := &subscription{id: id, delivered: make(map[string]position)}
	if raw, ok := fields["filter"]; ok {
		f, err := parseFilterJSON(raw)
		if err != nil {
			refuse("invalid-filter", err.Error())
			return
		}
		sub.filter = f
	}
	if raw, ok := fields["capture"]; ok {
		var level string
		if json.Unmarshal(raw, &level) != nil || aep.Capture(level).Rank() < 0 {
			refuse("invalid-filter", "capture must be none, metadata, redacted or full")
			return
		}
		sub.ceiling = aep.Capture(level)
	}
	var req replayRequest
	if raw, ok := fields["from"]; ok {
		var err error
		if req, err = parseFrom(raw); err != nil {
			refuse("invalid-filter", err.Error())
			return
		}
	}
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case len(req.points) > r.cfg.MaxFrom:
		refuse("limit-exceeded", fmt.Sprintf("%d resume positions exceed MaxFrom %d", len(req.points), r.cfg.MaxFrom))
		return
	case c.subs[id] != nil:
		refuse("invalid-filter", fmt.Sprintf("subscription %q already exists", id))
		return
	case len(c.subs) >= r.cfg.MaxSubscriptions:
		refuse("limit-exceeded", fmt.Sprintf("MaxSubscriptions %d reached", r.cfg.MaxSubscriptions))
		return
	}
	c.out.push(wsFrame{data: []byte(`{"type":"subscribed","id":` + quote(id) + `}`)}, false)
	for _, part := range r.replayLocked(req) {
		if part.exhausted {
			c.out.push(wsFrame{data: exhaustedFrame(id, part)}, false)
		}
		for _, e := range part.entries {
			if !sub.filter.match(e.ev) {
				continue
			}
			rc := renderCache{in: e, r: r}
			if data, ok := rc.bytes(sub.ceiling); ok {
				c.out.push(wsFrame{data: data}, false)
				sub.note(e, r.cfg.MaxSessions)
			}
		}
	}
	c.subs[id] = sub
	r.notifyLocked()
}

func quote(s string) string {
	raw, _ := json.Marshal(s) // a string always marshals
	return string(raw)
}

func exhaustedFrame(sub string, part replayPart) []byte {
	f := map[string]any{"type": "replay-exhausted", "sub": sub, "session": part.key.session}
	if part.hasEarliest {
		f["earliest"] = map[string]int64{"epoch": part.earliest.epoch, "seq": part.earliest.seq}
	}
	raw, _ := json.Marshal(f) // strings and integers only
	return raw
}

func (s *subscription) note(e *ingested, maxSessions int) {
	if !e.positioned {
		return
	}
	if _, ok := s.delivered[e.ev.Session]; ok || len(s.delivered) < maxSessions {
		s.delivered[e.ev.Session] = e.pos
	}
}

func (c *wsConn) unsubscribe(fields map[string]json.RawMessage) {
	var id string
	_ = json.Unmarshal(fields["id"], &id)
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	delete(c.subs, id)
	c.out.push(wsFrame{data: []byte(`{"type":"unsubscribed","id":` + quote(id) + `}`)}, false)
	c.r.notifyLocked()
}

// rosterEntry is one live (connection, claimed session) pair, with the
// claimant's declarations verbatim (AEP-0003 §4.1).
type rosterEntry struct {
	Session  string          `json:"session"`
	Agent    string          `json:"agent,omitempty"`
	Instance string          `json:"instance,omitempty"`
	Control  json.RawMessage `json:"control,omitempty"`
	Emits    json.RawMessage `json:"emits,omitempty"`
}

func (c *wsConn) roster(fields map[string]json.RawMessage) {
	r := c.r
	var id string
	_ = json.Unmarshal(fields["id"], &id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == "" {
		r.protocolViolationLocked(c.id, "roster request without an id ignored")
		return
	}
	if c.hello != nil && c.hello.Role == "emitter" {
		c.send(&ErrorFrame{Type: "error", ID: id, Code: "unauthorized", Detail: "emitter connections may not request the roster"})
		return
	}
	type claim struct {
		conn    *wsConn
		session string
	}
	var all []claim
	for other := range r.conns {
		if other.closing || other.leaving || other.hello == nil {
			continue
		}
		sessions := map[string]bool{}
		for key := range other.claims {
			sessions[key.session] = true
		}
		for s := range sessions {
			all = append(all, claim{other, s})
		}
	}
	slices.SortFunc(all, func(a, b claim) int {
		return cmp.Or(strings.Compare(a.session, b.session), a.conn.id-b.conn.id)
	})
	entries := make([]rosterEntry, len(all))
	for i, cl := range all {
		entries[i] = rosterEntry{Session: cl.session, Agent: cl.conn.hello.Agent, Instance: cl.conn.hello.Instance,
			Control: cl.conn.control, Emits: cl.conn.emits}
	}
	raw, err := json.Marshal(map[string]any{"type": "roster", "id": id, "entries": entries})
	if err != nil {
		c.send(&ErrorFrame{Type: "error", ID: id, Code: "limit-exceeded", Detail: "roster could not be encoded"})
		return
	}
	c.out.push(wsFrame{data: raw}, false)
}

// deliverLocked sends a live Event once if any subscription matches, at
// the widest of the matching ceilings.
func (c *wsConn) deliverLocked(in *ingested, rc *renderCache) {
	if c.closing || len(c.subs) == 0 {
		return
	}
	var matched []*subscription
	var ceilings []aep.Capture
	for _, s := range c.subs {
		if s.filter.match(in.ev) {
			matched = append(matched, s)
			ceilings = append(ceilings, s.ceiling)
		}
	}
	if len(matched) == 0 {
		return
	}
	data, ok := rc.bytes(widest(ceilings))
	if !ok {
		return
	}
	if !c.out.push(wsFrame{data: data}, true) {
		c.r.log.Info("AEP socket dropped: consumer too slow", "conn", c.id)
		c.abort()
		return
	}
	for _, s := range matched {
		s.note(in, c.r.cfg.MaxSessions)
	}
}

func (c *wsConn) describeLocked() Conn {
	d := Conn{ID: c.id, Subscriptions: slices.Sorted(maps.Keys(c.subs))}
	if h := c.hello; h != nil {
		d.Role, d.Agent, d.Instance, d.Accepts = h.Role, h.Agent, h.Instance, slices.Clone(h.Accepts)
	}
	sessions := map[string]bool{}
	for key := range c.claims {
		sessions[key.session] = true
	}
	d.Claims = slices.Sorted(maps.Keys(sessions))
	return d
}
