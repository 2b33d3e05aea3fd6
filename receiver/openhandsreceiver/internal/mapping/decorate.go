package mapping

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/runtrace"
)

// maxOpenToolCalls bounds the tool calls a conversation remembers while
// they await their observation; past it the oldest is forgotten (its answer
// then carries no cause and no duration).
const maxOpenToolCalls = 256

// Decorator fills in, on a conversation's mapped events, the metadata-level
// facts the pinned field maps leave out because they need more than the
// one vendor event at hand (AEP-0002 §5.2, §7):
//
//   - cause: a tool call's answer (tool.completed, tool.failed, tool.denied,
//     the user-reject vendor event) names its tool.requested;
//   - duration_ms on tool.completed and tool.failed (action to observation)
//     and on a run's terminal (run start to end), latency_ms on
//     attention.resolved, all from vendor timestamps;
//   - on run.finished, gen_ai.usage.input_tokens, gen_ai.usage.output_tokens
//     and cost {currency, total}: the growth of the server's accumulated
//     stats over the run (see Decorate for when run.finished waits for
//     them);
//   - traceparent on every event of a run (internal/aep/runtrace), so that
//     log records and the aep connector's spans share their ids; a child
//     whose session.started names its parent's run (parent.run) has its
//     runs in that run's trace, where the connector puts their spans.
//
// Fields go into data only when the event carries data (capture above
// none); cause and traceparent are envelope attributes. The Decorator is
// pure like the mapping: it runs over Conversation's output, so the pinned
// field maps stay exactly as the fixture has them. Its state (DecoratorState)
// is persisted with the conversation's (the receiver's durableState), beside
// the socket cursor: a run's stats baseline is only right if every stats
// update since it was seen.
type Decorator struct {
	s *DecoratorState // held where the caller keeps it, mutated in place
}

// DecoratorState is what a Decorator remembers between events.
type DecoratorState struct {
	// Tools are the tool calls awaiting an answer, by tool_call_id (or the
	// action's event id when the call has none).
	Tools map[string]ToolCall `json:"tools,omitempty"`
	// RunStartedAt is the vendor timestamp of the open run's start, "" if
	// no run is open.
	RunStartedAt string `json:"run_started_at,omitempty"`
	// RunBaseline is the stats when the open run started.
	RunBaseline Stats `json:"run_baseline,omitempty"`
	// AttentionAt is the vendor timestamp of the pending attention request.
	AttentionAt string `json:"attention_at,omitempty"`
	// Stats are the server's accumulated stats as last reported; nil until
	// the server reported any.
	Stats Stats `json:"stats,omitempty"`
	// PerResponseStats says the server was seen publishing a stats update
	// per LLM response, which a run.finished may wait for.
	PerResponseStats bool `json:"per_response_stats,omitempty"`
	// RunResponses counts the LLM responses the open run's events came from
	// (distinct llm_response_ids, LastResponse the latest), RunStatsUpdates
	// the stats updates seen since it started: the run's usage is complete
	// once there are as many updates as responses.
	RunResponses    int    `json:"run_responses,omitempty"`
	LastResponse    string `json:"last_response,omitempty"`
	RunStatsUpdates int    `json:"run_stats_updates,omitempty"`
	// Held is a run.finished (with anything that followed it in its batch)
	// waiting for the stats of its run's last LLM responses.
	Held []*aep.Event `json:"held,omitempty"`
	// Trace is the trace the session's runs are in, as hex: the parent
	// run's that its session.started names; "" for each run's own.
	Trace string `json:"trace,omitempty"`
}

// ToolCall is one tool call awaiting its answer.
type ToolCall struct {
	RequestedID string `json:"requested_id"`
	At          string `json:"at"` // the action's vendor timestamp
}

// Stats are accumulated LLM figures per usage id, as the server's stats
// report them (usage_to_metrics).
type Stats map[string]Usage

// Usage is one usage id's accumulated figures.
type Usage struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Cost             float64 `json:"cost"`
	// HasCost says the server reported accumulated_cost.
	HasCost bool `json:"has_cost,omitempty"`
}

// NewDecorator returns a Decorator that keeps its state in *state and
// resumes from it (the zero value: nothing known).
func NewDecorator(state *DecoratorState) *Decorator { return &Decorator{s: state} }

// Decorate fills in the events Conversation.Map returned for ev and
// returns what to emit now: out itself (or its head) unless a held
// run.finished goes first.
//
// The server reports each LLM response's usage in a stats update published
// after the response's own events, and the last one of a run may come after
// the status that ends the run (recorded on 1.58.2). So, once the server was
// seen publishing them, a run.finished whose run has seen fewer stats
// updates than LLM responses is held back until the next vendor event that
// is not a stats update leaving it incomplete, and emitted before that
// event's outputs: with the run's usage when the stats updates, or the run's
// closing full_state snapshot, completed it, else with none. The receiver
// bounds the wait in time: Decorate of the zero Event and no events
// releases what is held. Decorate of At(ts) and what Conversation.End
// returned, a held run.finished going first, decorates a session's end.
// Incomplete usage is never reported.
func (d *Decorator) Decorate(ev Event, out []*aep.Event) []*aep.Event {
	stats := false
	if ev.kind == "ConversationStateUpdateEvent" {
		d.observeStats(ev.Fields)
		switch str(ev.Fields, "key") {
		case "stats":
			stats = true
			d.s.PerResponseStats = true
			if d.s.RunStartedAt != "" || d.s.Held != nil {
				d.s.RunStatsUpdates++
			}
		case "full_state":
			// The server publishes a run's closing snapshot only once its
			// pending events are out: its stats are the run's final ones.
			if d.s.Held != nil {
				d.s.RunStatsUpdates = max(d.s.RunStatsUpdates, d.s.RunResponses)
			}
		}
	}
	d.countResponse(ev)
	if d.s.Held == nil || stats && !d.settled() {
		return d.decorate(ev, out)
	}
	held := d.release()
	return append(held, d.decorate(ev, out)...)
}

// countResponse counts the LLM response an agent event of the open run
// came from: actions, agent messages and condensations name it.
func (d *Decorator) countResponse(ev Event) {
	switch ev.kind {
	case "ActionEvent", "MessageEvent", "Condensation":
	default:
		return
	}
	if id := str(ev.Fields, "llm_response_id"); d.s.RunStartedAt != "" && id != "" && id != d.s.LastResponse {
		d.s.RunResponses++
		d.s.LastResponse = id
	}
}

// settled reports whether every LLM response of the run has had its stats
// update.
func (d *Decorator) settled() bool { return d.s.RunStatsUpdates >= d.s.RunResponses }

// Holding reports whether a run.finished is held back.
func (d *Decorator) Holding() bool { return d.s.Held != nil }

func (d *Decorator) release() []*aep.Event {
	held := d.s.Held
	d.s.Held = nil
	if d.settled() {
		d.putUsage(held[0])
	}
	d.resetRun()
	return held
}

// resetRun forgets the closed run's baseline and counters.
func (d *Decorator) resetRun() {
	d.s.RunBaseline, d.s.RunResponses, d.s.LastResponse, d.s.RunStatsUpdates = nil, 0, "", 0
}

// decorate decorates out and returns what is not held back.
func (d *Decorator) decorate(ev Event, out []*aep.Event) []*aep.Event {
	ts, fields, at, timed := ev.timestamp, ev.Fields, ev.at, ev.timed
	hold := -1
	for i, o := range out {
		switch o.Type {
		case "tool.requested":
			d.requested(toolKey(fields, str(fields, "id")), o.ID, ts)
		case "tool.completed", "tool.failed", "tool.denied", VendorType("UserRejectObservation"):
			var buf [64]byte // the key is only looked up: it is not built
			d.answered(o, appendToolKey(buf[:0], fields, str(fields, "action_id")), at, timed)
		case typeAttentionRequested:
			d.s.AttentionAt = ts
		case typeAttentionResolved:
			if start, ok := ParseVendorTime(d.s.AttentionAt); ok && timed {
				set(o, "latency_ms", millis(at.Sub(start)))
			}
			d.s.AttentionAt = ""
		case typeRunStarted:
			d.resetRun()
			d.s.RunStartedAt, d.s.RunBaseline = ts, d.s.Stats.clone()
		case typeRunFinished, typeRunFailed, typeRunCancelled:
			if d.runEnded(o, at, timed) && hold < 0 {
				hold = i
			}
		case typeSessionStarted:
			if parent, ok := runtrace.ParentRun(o); ok {
				d.s.Trace = hex.EncodeToString(parent.TraceID[:])
			}
		}
		if pos, ok := runtrace.Locate(o); ok {
			if trace, err := hex.DecodeString(d.s.Trace); d.s.Trace != "" && err == nil && len(trace) == len(pos.TraceID) {
				pos.TraceID = [16]byte(trace)
			}
			o.Traceparent = pos.Traceparent()
		}
	}
	if hold < 0 {
		return out
	}
	d.s.Held = append([]*aep.Event(nil), out[hold:]...)
	return out[:hold]
}

// toolKey names a tool call: its tool_call_id, else the action event id.
func toolKey(fields map[string]any, actionID string) string {
	var buf [64]byte
	return string(appendToolKey(buf[:0], fields, actionID))
}

// appendToolKey appends toolKey's name of a tool call to dst.
func appendToolKey(dst []byte, fields map[string]any, actionID string) []byte {
	if id := str(fields, "tool_call_id"); id != "" {
		return append(append(dst, "call "...), id...)
	}
	if actionID != "" {
		return append(append(dst, "action "...), actionID...)
	}
	return dst
}

func (d *Decorator) requested(key, id, ts string) {
	if key == "" {
		return
	}
	if d.s.Tools == nil {
		d.s.Tools = make(map[string]ToolCall)
	}
	if _, ok := d.s.Tools[key]; !ok && len(d.s.Tools) >= maxOpenToolCalls {
		d.forgetOldestTool()
	}
	d.s.Tools[key] = ToolCall{RequestedID: id, At: ts}
}

func (d *Decorator) forgetOldestTool() {
	oldest, first := "", true
	for k, c := range d.s.Tools {
		if first || c.At < d.s.Tools[oldest].At {
			oldest, first = k, false
		}
	}
	delete(d.s.Tools, oldest)
}

// answered closes the call named key (toolKey) that o answers.
func (d *Decorator) answered(o *aep.Event, key []byte, at time.Time, timed bool) {
	call, ok := d.s.Tools[string(key)]
	if !ok {
		return
	}
	delete(d.s.Tools, string(key))
	if o.Cause == "" {
		o.Cause = call.RequestedID
	}
	if o.Type != "tool.completed" && o.Type != "tool.failed" {
		return // tool.denied has no duration_ms
	}
	if start, ok := ParseVendorTime(call.At); ok && timed {
		set(o, "duration_ms", millis(at.Sub(start)))
	}
}

// runEnded puts the run's duration on its terminal and, on run.finished
// (the only terminal whose schema has usage and cost), the stats' growth
// since the run started; it reports whether run.finished must wait for
// the stats of the run's last responses. Nothing is put when the run's
// start or the server's stats were not seen.
func (d *Decorator) runEnded(o *aep.Event, at time.Time, timed bool) (hold bool) {
	started := d.s.RunStartedAt
	d.s.RunStartedAt = ""
	start, ok := ParseVendorTime(started)
	if ok && timed {
		set(o, "duration_ms", millis(at.Sub(start)))
	}
	if !ok || o.Type != typeRunFinished || d.s.Stats == nil || o.Data == nil {
		d.resetRun()
		return false
	}
	switch {
	case d.settled():
		d.putUsage(o)
	case d.s.PerResponseStats:
		return true // wait for the rest of the run's stats updates
	}
	d.resetRun()
	return false
}

// putUsage puts the stats' growth since the run's baseline on run.finished.
func (d *Decorator) putUsage(o *aep.Event) {
	end, begin := d.s.Stats.total(), d.s.RunBaseline.total()
	set(o, "gen_ai.usage.input_tokens", integer(end.PromptTokens-begin.PromptTokens))
	set(o, "gen_ai.usage.output_tokens", integer(end.CompletionTokens-begin.CompletionTokens))
	if end.HasCost {
		// litellm, which computes the server's costs, prices in US dollars.
		set(o, "cost", map[string]any{"currency": "USD", "total": decimal(end.Cost - begin.Cost)})
	}
}

// observeStats takes the accumulated figures of a stats update or a
// full_state snapshot. Figures only grow, so each is kept at its maximum:
// a stale snapshot (the connect-time full_state) cannot move them back.
func (d *Decorator) observeStats(f map[string]any) {
	var stats map[string]any
	switch str(f, "key") {
	case "stats":
		stats, _ = f["value"].(map[string]any)
	case "full_state":
		state, _ := f["value"].(map[string]any)
		stats, _ = state["stats"].(map[string]any)
	}
	byID, ok := stats["usage_to_metrics"].(map[string]any)
	if !ok {
		return
	}
	if d.s.Stats == nil {
		d.s.Stats = make(Stats, len(byID))
	}
	for id, raw := range byID {
		m, _ := raw.(map[string]any)
		tokens, _ := m["accumulated_token_usage"].(map[string]any)
		u := d.s.Stats[id]
		u.PromptTokens = max(u.PromptTokens, intField(tokens, "prompt_tokens"))
		u.CompletionTokens = max(u.CompletionTokens, intField(tokens, "completion_tokens"))
		if cost, ok := floatField(m, "accumulated_cost"); ok {
			u.Cost, u.HasCost = max(u.Cost, cost), true
		}
		d.s.Stats[id] = u
	}
}

func (s Stats) clone() Stats {
	if s == nil {
		return nil
	}
	c := make(Stats, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// total sums the figures of every usage id (the agent's LLM, a condenser's).
func (s Stats) total() Usage {
	var t Usage
	for _, u := range s {
		t.PromptTokens += u.PromptTokens
		t.CompletionTokens += u.CompletionTokens
		t.Cost += u.Cost
		t.HasCost = t.HasCost || u.HasCost
	}
	return t
}

// millis is a non-negative duration in whole milliseconds, as a JSON integer.
func millis(d time.Duration) json.Number { return integer(d.Milliseconds()) }

func integer(n int64) json.Number { return json.Number(strconv.FormatInt(max(n, 0), 10)) }

// decimal renders a cost difference to the pico-unit, which drops the
// float noise of subtracting two accumulated sums (0.0123, not
// 0.012299999999999998).
func decimal(f float64) json.Number {
	s := strconv.FormatFloat(max(f, 0), 'f', 12, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return json.Number(s)
}

func intField(m map[string]any, k string) int64 {
	n, _ := m[k].(json.Number)
	i, err := n.Int64()
	if err != nil {
		f, _ := n.Float64()
		return int64(f)
	}
	return i
}

func floatField(m map[string]any, k string) (float64, bool) {
	n, ok := m[k].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}
