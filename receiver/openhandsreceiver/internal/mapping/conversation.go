package mapping

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Vendor kinds the conversation treats specially before the per-kind maps.
const (
	kindStreamingDelta = "StreamingDeltaEvent"
	kindToken          = "TokenEvent"
)

// deltaType is the vendor type of StreamingDeltaEvent.
const deltaType = "x.openhands.streaming.delta"

// timeLayout is the envelope time: receive time, UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z"

// Conversation is the mapping state of ONE OpenHands conversation (one AEP
// session): the last execution status, the run counter and the open run,
// the pending attention request, the open delta stream and whether the
// session has ended. It is not safe for concurrent use; the receiver feeds
// each conversation from one goroutine, in socket delivery order.
//
// Every output is a complete envelope except seq and epoch, which the
// receiver assigns in one place. Ids are deterministic (aep.DeterministicID
// over the vendor timestamp and source, vendor event id, output type and
// the output's ordinal among that vendor event's outputs of that type), so
// a replayed vendor fact maps to the ids it had the first time.
//
// Order of the outputs of one vendor event, chosen so the stream never
// contradicts itself:
//  1. a StreamingDeltaEvent stream still open when an agent-sourced event
//     arrives is flushed first (its held-back remainder as one final
//     x.openhands.streaming.delta), because that event ends the stream;
//  2. a run.started the status table implies comes next, so the state event
//     reporting "running" already carries the new run;
//  3. then the vendor event's own mapping (for a state update, the
//     state.delta or state.snapshot);
//  4. then the status table's other moments in table order: attention
//     requested/resolved, the run terminal (after the state event, which
//     still carries the run it closes), and session.ended last.
//
// After session.ended the conversation emits nothing more: Map, Start and
// End return nil.
//
// What of it survives a restart is its State, which it holds where the
// caller keeps it (NewConversation).
type Conversation struct {
	cfg Config
	// s is what survives a restart, held where the caller keeps it (the
	// receiver's stored session state) and mutated in place.
	s *State
	// staleSnapshot marks a connect-time full_state that must not move the
	// execution status (see MapConnectSnapshot).
	staleSnapshot bool

	stream    StreamRedactor // the open delta stream's redactor, nil if none
	lastDelta origin         // the stream's last delta, which its flush is attributed to
	// undecodable counts the stand-ins for undecodable input, which tells
	// their ids apart (not stored: their ids also hold the receive time).
	undecodable uint64
	// counts are the call's outputs so far per origin key and type (see
	// emit): a call has a few, so a list searched in order, its space kept
	// from call to call (begin empties it; one call runs at a time).
	counts []outputCount
}

// NewConversation checks cfg, fills its defaults and returns a
// conversation that keeps its State in *state and resumes from it: the
// zero State is a conversation no event has been seen for, one a restart
// restored goes on as if the events that led to it had been mapped here
// (with no delta stream open). A nil state is a fresh one of its own.
func NewConversation(cfg Config, state *State) (*Conversation, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("openhands mapping config: %w", err)
	}
	if state == nil {
		state = &State{}
	}
	return &Conversation{cfg: cfg, s: state}, nil
}

// Source is the envelope source of every event this conversation emits.
func (c *Conversation) Source() string { return c.cfg.Source }

// Start returns session.started for the conversation's first sight:
// data.client names the agent server and data.server carries its host:port;
// no label (it is redaction-gated and the envelope session already carries
// the conversation id); the lineage (Config.Lineage) as putLineage puts it. Its id is derived from createdAt, the conversation's
// creation time, so a restarted receiver re-emits the same id. It returns
// nil once the session has started (a restored conversation) or ended.
func (c *Conversation) Start(createdAt, receivedAt time.Time) *aep.Event {
	if c.s.Ended || c.s.StartedID != "" {
		return nil
	}
	e := c.begin(receivedAt)
	out := e.emit(typeSessionStarted, origin{key: "session", at: createdAt})
	out.Run = ""
	set(out, "client", map[string]any{"name": "openhands-agent-server"})
	if c.cfg.ServerHost != "" {
		set(out, "server", c.cfg.ServerHost)
	}
	c.putLineage(out)
	c.s.StartedID = out.ID
	return out
}

// Map returns the AEP events one vendor event implies, in order (see the
// type's comment), stamped with receivedAt.
func (c *Conversation) Map(ev Event, receivedAt time.Time) []*aep.Event {
	if c.s.Ended || ev.kind == "" || ev.kind == kindToken {
		return nil // token-id planes are not observability
	}
	e := c.begin(receivedAt)
	o := origin{
		id:  ev.Fields["id"], // the decoded values: data holds them as they are
		ts:  ev.Fields["timestamp"],
		key: "event " + ev.id,
		at:  ev.timeOr(receivedAt),
	}
	if ev.kind == kindStreamingDelta {
		if c.cfg.Deltas {
			c.mapDelta(e, ev, o)
		}
		return e.out
	}
	if ev.source == "agent" {
		c.endStream(e)
	}
	c.mapKind(e, ev, o)
	return e.out
}

// MapConnectSnapshot maps the first frame of a legacy socket connection,
// normally the full_state snapshot the server takes when the socket
// subscribes. The receiver pages the persisted history after subscribing,
// so once any status is known the snapshot may be older than that history:
// it is then emitted as state.snapshot but does not move the execution
// status. Before any status is known it is the only status fact there is
// and counts like any other. Frames that are not full_state map as Map.
func (c *Conversation) MapConnectSnapshot(ev Event, receivedAt time.Time) []*aep.Event {
	c.staleSnapshot = c.s.Status != ""
	defer func() { c.staleSnapshot = false }()
	return c.Map(ev, receivedAt)
}

// Status is the last execution status seen, "" before the first.
func (c *Conversation) Status() string { return c.s.Status }

// prevStatus is the status the status table moves from: nil before the
// first.
func (c *Conversation) prevStatus() *string {
	if c.s.Status == "" {
		return nil
	}
	prev := c.s.Status
	return &prev
}

// Run is the open run's id, "" when none is open.
func (c *Conversation) Run() string { return c.s.Run }

// Ended reports whether session.ended has been emitted.
func (c *Conversation) Ended() bool { return c.s.Ended }

// End closes a conversation that disappeared (no longer listed, socket gone
// for good) exactly as a transition to deleting would: the pending
// attention is dismissed, an open run cancelled, then session.ended
// {reason: killed}. vendorTS, the last vendor timestamp seen ("" if none),
// rides at data.vendor_ts and seeds the ids.
func (c *Conversation) End(at time.Time, vendorTS string) []*aep.Event {
	if c.s.Ended {
		return nil
	}
	e := c.begin(at)
	o := origin{ts: vendorTS, key: "end " + vendorTS, at: vendorTime(vendorTS, at)}
	for _, m := range StatusMoments(c.prevStatus(), StatusDeleting) {
		c.apply(e, o, m)
	}
	return e.out
}

// applyStatus runs the status table for a state update reporting next
// around the emission of the state event itself (emitState).
func (c *Conversation) applyStatus(e *emission, o origin, next string, emitState func()) {
	moments := StatusMoments(c.prevStatus(), next)
	// A running or waiting conversation always has an open run: one the
	// table does not open (a status seen first as paused, then resumed) is
	// opened here.
	if c.s.Run == "" && (next == StatusRunning || next == StatusWaiting) && !hasMoment(moments, typeRunStarted) {
		moments = append([]Moment{{Type: typeRunStarted, Data: map[string]any{}}}, moments...)
	}
	opening := 0
	for opening < len(moments) && moments[opening].Type == typeRunStarted {
		opening++
	}
	for _, m := range moments[:opening] {
		c.apply(e, o, m)
	}
	emitState()
	for _, m := range moments[opening:] {
		c.apply(e, o, m)
	}
	// A run the table leaves open at a status that ends runs (waiting →
	// idle after a rejected confirmation, paused → idle, a future status →
	// finished) would never get a terminal: close it as running → idle
	// closes, after the attention the table resolved.
	if c.s.Run != "" && ClosesRuns(next) {
		c.apply(e, o, Moment{Type: typeRunFinished, Data: map[string]any{"reason": StatusIdle}})
	}
	c.s.Status = next
}

func hasMoment(moments []Moment, typ string) bool {
	for _, m := range moments {
		if m.Type == typ {
			return true
		}
	}
	return false
}

// apply turns one moment into events. It is the only place run boundaries,
// the attention loop and the session end are decided, and it keeps the
// lifecycle invariants whatever the table says: a run.started opens a new
// run (applyStatus closes a run the table leaves open at idle, finished,
// error or stuck, so none is left behind); a terminal needs an open run,
// so no run ever gets two; attention is requested at most once at a time
// and resolved only while pending; the session ends once.
func (c *Conversation) apply(e *emission, o origin, m Moment) {
	switch m.Type {
	case typeRunStarted:
		c.s.Runs++
		c.s.Run = "run:" + c.cfg.ConversationID + ":" + strconv.Itoa(c.s.Runs)
		out := e.emit(m.Type, o)
		c.s.RunStartedID = out.ID
		setAll(out, m.Data)
	case typeAttentionRequested:
		if c.s.Attention != "" {
			return
		}
		out := e.emit(m.Type, o)
		setAll(out, m.Data)
		c.s.Attention = out.ID
	case typeAttentionResolved:
		if c.s.Attention == "" {
			return
		}
		out := e.emit(m.Type, o)
		// AEP-0002 §7: lifecycle events after a request name it.
		out.Subject, out.Cause = c.s.Attention, c.s.Attention
		setAll(out, m.Data)
		c.s.Attention = ""
	case typeRunFinished, typeRunFailed, typeRunCancelled:
		if c.s.Run == "" {
			return
		}
		out := e.emit(m.Type, o)
		out.Cause = c.s.RunStartedID
		for k, v := range m.Data {
			if m.Type == typeRunCancelled && k == "reason" {
				// run.cancelled.reason is annotated redacted: it rides only
				// at redacted or above, even as a fixed token.
				s, _ := v.(string)
				if r, ok := c.text(out, s); ok {
					set(out, k, r)
				}
				continue
			}
			set(out, k, v)
		}
		c.s.Run, c.s.RunStartedID = "", ""
	case typeSessionEnded:
		c.endSession(e, o, m)
	}
}

// endSession closes everything still open, in the order AEP-0002 §7 needs
// (attention before session.ended), then ends the session.
func (c *Conversation) endSession(e *emission, o origin, ended Moment) {
	if c.s.Ended {
		return
	}
	c.endStream(e)
	c.apply(e, o, Moment{Type: typeAttentionResolved, Data: map[string]any{"resolution": "dismissed"}})
	c.apply(e, o, Moment{Type: typeRunCancelled, Data: map[string]any{"reason": "deleting"}})
	out := e.emit(ended.Type, o)
	out.Cause = c.s.StartedID
	setAll(out, ended.Data)
	c.s.Ended = true
}

// mapDelta maps a StreamingDeltaEvent (deltas opted in). Content rides only
// at redacted (the stream redactor's released text) or full (verbatim), in
// data.payload.content; reasoning_content never rides (the vendor plane has
// no schema field annotated for it).
func (c *Conversation) mapDelta(e *emission, ev Event, o origin) {
	out := e.emit(deltaType, o)
	c.lastDelta = o
	chunk, _ := ev.Fields["content"].(string)
	if chunk == "" {
		return
	}
	var released string
	switch out.Capture {
	case aep.CaptureRedacted:
		if c.stream == nil {
			c.stream = c.cfg.NewStreamRedactor()
		}
		if c.stream != nil {
			released = c.stream.Write(chunk)
		}
	case aep.CaptureFull:
		released = chunk
	}
	if released != "" {
		set(out, "payload", map[string]any{"content": released})
	}
}

// endStream flushes an open delta stream: the held-back remainder rides as
// one final delta attributed to the stream's last vendor delta (its second
// output, so its id differs from that delta's own).
func (c *Conversation) endStream(e *emission) {
	if c.stream == nil {
		return
	}
	rest := c.stream.Flush()
	c.stream = nil
	if rest == "" {
		return
	}
	out := e.emitAt(deltaType, c.lastDelta, 1)
	set(out, "payload", map[string]any{"content": rest})
}

// origin is the vendor fact an output derives from.
type origin struct {
	// id and ts are the vendor event id and timestamp (verbatim) as data
	// holds them: strings, nil or "" when there are none. A value of the
	// decoded event is taken as it is, not converted anew per output.
	id, ts any
	key    string    // the id key's fact part
	at     time.Time // the id's time part
}

// ParseVendorTime is the one reading of the agent server's timestamps:
// an event's, naive server-local, is read as UTC (with no offset on the
// wire, UTC is the only reading that invents nothing), with or without
// microseconds (both Python isoformat shapes); a ConversationInfo's, or
// an event's should a future server add one, with its offset. False for
// anything else.
func ParseVendorTime(ts string) (time.Time, bool) {
	if t, err := time.ParseInLocation("2006-01-02T15:04:05", ts, time.UTC); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		return t.UTC(), true
	}
	return time.Time{}, false
}

// vendorTime is ParseVendorTime, falling back to fallback.
func vendorTime(ts string, fallback time.Time) time.Time {
	if t, ok := ParseVendorTime(ts); ok {
		return t
	}
	return fallback
}

// emission collects the outputs of one call.
type emission struct {
	c    *Conversation
	time string
	out  []*aep.Event
}

type outputCount struct {
	origin, typ string
	n           int
}

// begin starts a call's emission. It is small enough to be inlined, so
// the emission lives on its caller's stack.
func (c *Conversation) begin(receivedAt time.Time) *emission {
	return &emission{c: c, time: c.beginAt(receivedAt)}
}

// beginAt empties counts for a new call and returns its envelope time.
func (c *Conversation) beginAt(receivedAt time.Time) string {
	clear(c.counts)
	c.counts = c.counts[:0]
	return receivedAt.UTC().Format(timeLayout)
}

// emit appends the next output of type typ derived from o.
func (e *emission) emit(typ string, o origin) *aep.Event {
	counts := e.c.counts
	for i := range counts {
		if c := &counts[i]; c.origin == o.key && c.typ == typ {
			c.n++
			return e.emitAt(typ, o, c.n-1)
		}
	}
	e.c.counts = append(counts, outputCount{origin: o.key, typ: typ, n: 1})
	return e.emitAt(typ, o, 0)
}

// emitAt appends an output with an explicit ordinal among o's outputs of
// type typ. The envelope is complete but for seq/epoch; data holds the
// vendor stamps unless the capture level is none.
func (e *emission) emitAt(typ string, o origin, ordinal int) *aep.Event {
	c := e.c
	out := &aep.Event{
		AEP:      aep.Version,
		ID:       aep.DeterministicID(o.at, c.cfg.Source, o.key, typ, strconv.Itoa(ordinal)),
		Type:     typ,
		Time:     e.time,
		Source:   c.cfg.Source,
		Agent:    c.cfg.Agent,
		Session:  c.cfg.ConversationID,
		Run:      c.s.Run,
		Severity: severityOf(typ),
		Capture:  c.cfg.Ceiling.For(typ),
	}
	if out.Capture != aep.CaptureNone {
		out.Data = make(map[string]any, 4)
		if ts, _ := o.ts.(string); ts != "" {
			out.Data["vendor_ts"] = o.ts
		}
		if id, _ := o.id.(string); id != "" {
			out.Data["vendor_event_id"] = o.id
		}
	}
	e.out = append(e.out, out)
	return out
}

// severityOf is the severity of each emitted type: the vendor plane at
// debug (design record), attention.requested at notice (AEP-0002 §4.1),
// the golden conventions for failures, denials and cancellations, info for
// everything else.
func severityOf(typ string) aep.Severity {
	switch {
	case strings.HasPrefix(typ, "x."):
		return aep.SeverityDebug
	case typ == "tool.failed" || typ == typeRunFailed:
		return aep.SeverityError
	case typ == "tool.denied":
		return aep.SeverityWarning
	case typ == typeAttentionRequested || typ == typeRunCancelled:
		return aep.SeverityNotice
	default:
		return aep.SeverityInfo
	}
}

// set adds a data field unless the event carries no data (capture none).
func set(out *aep.Event, k string, v any) {
	if out.Data != nil {
		out.Data[k] = v
	}
}

func setAll(out *aep.Event, fields map[string]any) {
	for k, v := range fields {
		set(out, k, v)
	}
}

// text returns s as a field annotated redacted may carry it in out:
// redacted at redacted, verbatim at full, nothing below.
func (c *Conversation) text(out *aep.Event, s string) (string, bool) {
	switch out.Capture {
	case aep.CaptureRedacted:
		return c.cfg.Redactor.Text(s), true
	case aep.CaptureFull:
		return s, true
	default:
		return "", false
	}
}

// value is text for decoded JSON; at full it returns a copy of v.
func (c *Conversation) value(out *aep.Event, v any) (any, bool) {
	switch out.Capture {
	case aep.CaptureRedacted:
		return c.cfg.Redactor.Value(v), true
	case aep.CaptureFull:
		return aep.CloneValue(v), true
	default:
		return nil, false
	}
}
