package aeprelaytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

// normalize trims the bytes around an Event and compacts one that spans
// lines, so that SSE can carry it as a single data line. A single-line
// Event keeps its bytes.
func normalize(raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if !bytes.ContainsAny(raw, "\r\n") {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw // validation will refuse it
	}
	return b.Bytes()
}

// parseEvent is the envelope gate every binding shares: schema first, then
// the typed decode. doc is raw decoded by aep.DecodeValue, or nil.
func parseEvent(raw []byte, doc any) (*aep.Event, error) {
	if doc == nil {
		var err error
		if doc, err = aep.DecodeValue(raw); err != nil {
			return nil, schema.ValidateJSON(raw) // the schema's syntax verdict
		}
	}
	if err := schema.ValidateValue(doc); err != nil {
		return nil, err
	}
	ev, err := aep.EventOf(doc)
	if err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	return ev, nil
}

// admit is the gate every binding's Events pass: the schema, the typed
// decode, then the Refuse policy. A refused Event is named by its id as
// far as it can be read; one that breaks the schema is also recorded as a
// violation.
func (r *Relay) admit(raw []byte, doc any, b Binding, conn int) (ev *aep.Event, id string, err error) {
	ev, err = parseEvent(raw, doc)
	if err != nil {
		v := schemaViolation(raw, b, conn, err)
		r.mu.Lock()
		r.recordViolationLocked(v)
		r.mu.Unlock()
		return nil, v.EventID, err
	}
	if r.cfg.Refuse != nil {
		if err := r.cfg.Refuse(ev); err != nil {
			r.log.Info("AEP event refused by policy", "binding", b, "conn", conn, "type", ev.Type, "id", ev.ID, "error", err)
			return nil, ev.ID, err
		}
	}
	return ev, ev.ID, nil
}

// schemaViolation describes a refused Event from whatever of it can be read.
func schemaViolation(raw []byte, b Binding, conn int, err error) Violation {
	var head struct{ ID, Type, Source any }
	_ = json.Unmarshal(raw, &head)
	str := func(v any) string { s, _ := v.(string); return s }
	return Violation{
		Kind: ViolationSchema, Binding: b, Conn: conn,
		EventID: str(head.ID), Type: str(head.Type), Source: str(head.Source), Err: err,
	}
}

var vendorControl = regexp.MustCompile(`^x\.[a-z0-9_-]+\.control\.`)

// isCommand reports whether a type is routed as a command: control.*
// except the acks, which are the target's own session Events, and
// x.{vendor}.control.* (AEP-0004 §2).
func isCommand(typ string) bool {
	if typ == "control.accepted" || typ == "control.rejected" {
		return false
	}
	return strings.HasPrefix(typ, "control.") || vendorControl.MatchString(typ)
}

// claims reports whether carrying this Event claims its session for
// command routing: a session-scoped Event does, a foreign-emitter one
// (a command, attention.routed) does not (AEP-0001 §5.2).
func claims(ev *aep.Event) bool {
	return ev.Session != "" && !isCommand(ev.Type) && ev.Type != "attention.routed"
}

// ingestLocked is the relay's single entry for a valid Event from any
// binding (the reference relay's ingest(ev, fromConn)): it records and
// stream-checks the Event, updates the sender's claims, then routes a
// command, fans an agent.* signal out live only, or buffers everything else
// and fans it out as received. It returns a command's refusal, if any,
// which it has also sent to from. r.mu must be held.
func (r *Relay) ingestLocked(in *ingested, from *wsConn) *ErrorFrame {
	defer r.notifyLocked()
	ev := in.ev
	r.st.received++
	if err := r.st.checker.Add(ev); err != nil {
		r.recordViolationLocked(Violation{
			Kind: ViolationStream, Binding: in.binding, Conn: in.conn,
			EventID: ev.ID, Type: ev.Type, Source: ev.Source, Err: err,
		})
	}
	idKey := sessionKey{ev.Source, ev.ID}
	if _, seen := r.st.seen[idKey]; !seen {
		r.st.seen[idKey] = struct{}{}
		r.st.events = appendBounded(r.st.events, in.record(), r.cfg.MaxRecords)
	}
	if from != nil {
		from.carriedLocked(ev)
	}
	switch {
	case isCommand(ev.Type):
		return r.routeLocked(in, from)
	case strings.HasPrefix(ev.Type, "agent."):
		r.fanOutLocked(in)
	default:
		r.st.store.admit(in)
		r.fanOutLocked(in)
		if ev.Type == "session.ended" {
			r.releaseClaimsLocked(sessionKey{ev.Source, ev.Session})
		}
	}
	return nil
}

// carriedLocked notes an Event this connection carried: it claims the
// session, and it must speak for the identity of the hello.
func (c *wsConn) carriedLocked(ev *aep.Event) {
	if c.hello != nil && c.hello.Agent != "" && ev.Agent != c.hello.Agent {
		c.r.protocolViolationLocked(c.id, "%s %s carries agent %q on a connection whose hello identity is %q (AEP-0003 §4 rule 3)",
			ev.Type, ev.ID, ev.Agent, c.hello.Agent)
	}
	if claims(ev) {
		c.claims[sessionKey{ev.Source, ev.Session}] = struct{}{}
	}
}

// releaseClaimsLocked ends every claim on a session that has ended.
func (r *Relay) releaseClaimsLocked(key sessionKey) {
	for c := range r.conns {
		delete(c.claims, key)
	}
}

// claimantsLocked are the live connections that claim a bare session
// (routing addresses session alone, AEP-0004 §2.2), by id.
func (r *Relay) claimantsLocked(session string) []*wsConn {
	var out []*wsConn
	for c := range r.conns {
		if c.closing || c.leaving {
			continue
		}
		for key := range c.claims {
			if key.session == session {
				out = append(out, c)
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b *wsConn) int { return a.id - b.id })
	return out
}

// routeLocked delivers a command byte-identically to the one live
// claimant of its session, or refuses it toward the sender (AEP-0004 §4;
// reference routeCommand). This is the only place commands go anywhere.
func (r *Relay) routeLocked(in *ingested, from *wsConn) *ErrorFrame {
	ev := in.ev
	cmd := Command{ID: ev.ID, Type: ev.Type, Session: ev.Session, Binding: in.binding, From: in.conn, Raw: in.raw}
	refuse := func(code, detail string) *ErrorFrame {
		f := &ErrorFrame{Type: "error", Cause: ev.ID, Code: code, Detail: detail}
		cmd.Refusal = f
		r.st.commands = appendBounded(r.st.commands, cmd, r.cfg.MaxRecords)
		r.log.Info("AEP command refused", "type", ev.Type, "id", ev.ID, "session", ev.Session, "code", code)
		if from != nil {
			from.out.push(wsFrame{data: f.bytes()}, false)
		}
		return f
	}
	if r.token == "" {
		return refuse("unauthorized", "the relay has no token: it is watch-only and never routes commands")
	}
	claimants := r.claimantsLocked(ev.Session)
	switch len(claimants) {
	case 0:
		return refuse("no-route", fmt.Sprintf("no live connection claims session %q", ev.Session))
	case 1:
	default:
		return refuse("ambiguous", fmt.Sprintf("%d live connections claim session %q", len(claimants), ev.Session))
	}
	target := claimants[0]
	if !slices.Contains(target.hello.Accepts, ev.Type) {
		return refuse("unsupported", fmt.Sprintf("the claimant of session %q does not accept %s", ev.Session, ev.Type))
	}
	if !target.out.push(wsFrame{data: in.raw}, true) {
		target.abort()
		return refuse("no-route", fmt.Sprintf("the claimant of session %q is too slow and was dropped", ev.Session))
	}
	cmd.To = target.id
	r.st.commands = appendBounded(r.st.commands, cmd, r.cfg.MaxRecords)
	r.log.Info("AEP command routed", "type", ev.Type, "id", ev.ID, "session", ev.Session, "conn", target.id)
	return nil
}

// fanOutLocked delivers an Event live to every matching subscriber, as
// received (no dedupe: AEP-0003 §5).
func (r *Relay) fanOutLocked(in *ingested) {
	rc := &renderCache{in: in, r: r}
	for c := range r.conns {
		c.deliverLocked(in, rc)
	}
	for s := range r.streams {
		s.deliverLocked(in, rc)
	}
}

// renderCache holds one Event's bytes per capture ceiling during a
// fan-out, so that each level is down-levelled once (AEP-0003 §6.4).
type renderCache struct {
	in      *ingested
	r       *Relay
	byLevel map[aep.Capture][]byte
}

// bytes returns the Event as delivered under ceiling ("" = as received).
func (rc *renderCache) bytes(ceiling aep.Capture) ([]byte, bool) {
	if ceiling == "" || ceiling.Allows(rc.in.ev.EffectiveCapture()) {
		return rc.in.raw, true
	}
	if raw, ok := rc.byLevel[ceiling]; ok {
		return raw, true
	}
	raw, err := capture.Downlevel(rc.in.ev, ceiling).MarshalJSON()
	if err != nil {
		rc.r.log.Error("AEP down-level failed; event not delivered", "id", rc.in.ev.ID, "error", err)
		return nil, false
	}
	if rc.byLevel == nil {
		rc.byLevel = make(map[aep.Capture][]byte)
	}
	rc.byLevel[ceiling] = raw
	return raw, true
}

// widest is the most permissive of some subscriptions' ceilings ("" = as
// received).
func widest(ceilings []aep.Capture) aep.Capture {
	best := ceilings[0]
	for _, c := range ceilings[1:] {
		if best == "" || c == "" {
			return ""
		}
		if c.Rank() > best.Rank() {
			best = c
		}
	}
	return best
}

// replayRequest is a parsed `from`: replay-all, or resume points.
type replayRequest struct {
	all    bool
	points []resumePoint
}

type resumePoint struct {
	session string
	after   position
}

// parseFrom reads `from` (AEP-0003 §3.3, §6.5): "all" or an array of
// {session, epoch, seq}; epoch defaults to 0.
func parseFrom(raw []byte) (replayRequest, error) {
	var all string
	if json.Unmarshal(raw, &all) == nil {
		if all != "all" {
			return replayRequest{}, fmt.Errorf("from must be \"all\" or an array of positions, not %q", all)
		}
		return replayRequest{all: true}, nil
	}
	var items []struct {
		Session *string `json:"session"`
		Epoch   *int64  `json:"epoch"`
		Seq     *int64  `json:"seq"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return replayRequest{}, fmt.Errorf("from must be \"all\" or an array of {session, epoch, seq}: %w", err)
	}
	req := replayRequest{}
	for i, it := range items {
		if it.Session == nil || *it.Session == "" || it.Seq == nil || *it.Seq < 0 || (it.Epoch != nil && *it.Epoch < 0) {
			return replayRequest{}, fmt.Errorf("from[%d] needs a session and seq ≥ 0 (epoch ≥ 0 when given)", i)
		}
		p := resumePoint{session: *it.Session, after: position{seq: *it.Seq}}
		if it.Epoch != nil {
			p.after.epoch = *it.Epoch
		}
		req.points = append(req.points, p)
	}
	return req, nil
}

// replayLocked returns what a replay request replays.
func (r *Relay) replayLocked(req replayRequest) []replayPart {
	if req.all {
		return r.st.store.replayAll()
	}
	var parts []replayPart
	for _, p := range req.points {
		parts = append(parts, r.st.store.replayAfter(p.session, p.after)...)
	}
	return parts
}
