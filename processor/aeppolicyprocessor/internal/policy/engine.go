package policy

import (
	"maps"
	"slices"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

// Engine judges events against the policies. It is not safe for
// concurrent use; the processor holds one lock around it.
type Engine struct {
	policies    *Policies
	nextEpoch   func() int64
	maxSessions int

	sessions map[SessionKey]*SessionState
	agents   map[string]*AgentState

	// changes is the change set since Begin: each touched entry's state
	// before it, nil when it did not exist.
	changes *changeSet
}

type changeSet struct {
	sessions map[SessionKey]*SessionState
	agents   map[string]*AgentState
}

// New returns an engine; nextEpoch hands out the epoch of a session the
// engine has no state for, and maxSessions bounds the sessions kept.
func New(p *Policies, nextEpoch func() int64, maxSessions int) *Engine {
	return &Engine{
		policies:    p,
		nextEpoch:   nextEpoch,
		maxSessions: maxSessions,
		sessions:    make(map[SessionKey]*SessionState),
		agents:      make(map[string]*AgentState),
	}
}

// Restore puts stored states back, before any event.
func (e *Engine) Restore(sessions []*SessionState, agents []*AgentState) {
	for _, st := range sessions {
		e.sessions[SessionKey{st.Agent, st.Session}] = st
	}
	for _, a := range agents {
		e.agents[a.Agent] = a
	}
}

// Begin starts a change set: what Observe and Tick change from here is
// reported by Commit, or undone by Rollback.
func (e *Engine) Begin() {
	e.changes = &changeSet{sessions: make(map[SessionKey]*SessionState), agents: make(map[string]*AgentState)}
}

// Changes is what a change set changed: the states to store, the
// sessions to forget, and whether the set of sessions and agents changed
// (an index of them needs writing).
type Changes struct {
	Sessions    []*SessionState
	Removed     []SessionKey
	Agents      []*AgentState
	KeysChanged bool
}

// Pending reports what the open change set changed so far, in key order.
func (e *Engine) Pending() Changes {
	var c Changes
	for _, k := range slices.SortedFunc(maps.Keys(e.changes.sessions), compareKeys) {
		st, now := e.sessions[k]
		before := e.changes.sessions[k]
		if now {
			c.Sessions = append(c.Sessions, st)
		} else if before != nil {
			c.Removed = append(c.Removed, k)
		}
		c.KeysChanged = c.KeysChanged || now != (before != nil)
	}
	for _, a := range slices.Sorted(maps.Keys(e.changes.agents)) {
		c.Agents = append(c.Agents, e.agents[a])
		c.KeysChanged = c.KeysChanged || e.changes.agents[a] == nil
	}
	return c
}

// Commit ends the change set, keeping its changes.
func (e *Engine) Commit() { e.changes = nil }

// Rollback ends the change set and restores every state it touched, so
// the same events observed again cross the same breaches at the same
// positions. It reports what it restored, for storage to follow.
func (e *Engine) Rollback() Changes {
	restore := &changeSet{sessions: make(map[SessionKey]*SessionState), agents: make(map[string]*AgentState)}
	for k, before := range e.changes.sessions {
		restore.sessions[k] = e.sessions[k]
		if before == nil {
			delete(e.sessions, k)
		} else {
			e.sessions[k] = before
		}
	}
	for a, before := range e.changes.agents {
		if before == nil {
			// Storage may hold what the change spent: an empty agent
			// overwrites it, and is what a new agent is.
			before = &AgentState{Version: StateVersion, Agent: a}
		}
		e.agents[a] = before
		restore.agents[a] = before
	}
	// What was rolled back is now the "before" of the restoring change.
	e.changes = restore
	c := e.Pending()
	e.changes = nil
	return c
}

// Delivered reports that the events of breaches were taken: they leave
// their sessions' unsent lists. It is no change to store at once: the
// next write of the session carries it, and until then a restart sends
// them again, which consumers dedupe.
func (e *Engine) Delivered(breaches []Breach) {
	for _, b := range breaches {
		if st, ok := e.sessions[SessionKey{b.Agent, b.Session}]; ok {
			st.Unsent = slices.DeleteFunc(st.Unsent, func(u Breach) bool { return u.Epoch == b.Epoch && u.Seq == b.Seq })
		}
	}
}

// Unsent are the breaches of every session not reported delivered, by
// session and position.
func (e *Engine) Unsent() []Breach {
	var out []Breach
	for _, k := range slices.SortedFunc(maps.Keys(e.sessions), compareKeys) {
		out = append(out, e.sessions[k].Unsent...)
	}
	return out
}

// Keys are the sessions and agents the engine holds: what an index of the
// stored states lists.
func (e *Engine) Keys() ([]SessionKey, []string) {
	return slices.SortedFunc(maps.Keys(e.sessions), compareKeys), slices.Sorted(maps.Keys(e.agents))
}

func compareKeys(a, b SessionKey) int {
	if a.Agent != b.Agent {
		if a.Agent < b.Agent {
			return -1
		}
		return 1
	}
	switch {
	case a.Session < b.Session:
		return -1
	case a.Session > b.Session:
		return 1
	}
	return 0
}

// touchSession records k's state before the change set changes it.
func (e *Engine) touchSession(k SessionKey) {
	if e.changes != nil {
		recordBefore(e.changes.sessions, e.sessions, k)
	}
}

func (e *Engine) touchAgent(agent string) {
	if e.changes != nil {
		recordBefore(e.changes.agents, e.agents, agent)
	}
}

// recordBefore keeps a copy of current[k] in before, nil when absent,
// unless before has k already.
func recordBefore[K comparable, V any](before, current map[K]*V, k K) {
	if _, ok := before[k]; ok {
		return
	}
	var v *V
	if st, ok := current[k]; ok {
		v = clone(st)
	}
	before[k] = v
}

// session is k's state, created at now (evicting the longest-quiet
// session past maxSessions).
func (e *Engine) session(k SessionKey, now time.Time) *SessionState {
	e.touchSession(k)
	if st, ok := e.sessions[k]; ok {
		return st
	}
	if len(e.sessions) >= e.maxSessions {
		var oldest SessionKey
		var at time.Time
		first := true
		for key, st := range e.sessions {
			if first || st.LastEvent.Before(at) || (st.LastEvent.Equal(at) && compareKeys(key, oldest) < 0) {
				oldest, at, first = key, st.LastEvent, false
			}
		}
		e.touchSession(oldest)
		delete(e.sessions, oldest)
	}
	st := &SessionState{Version: StateVersion, Agent: k.Agent, Session: k.Session, Epoch: e.nextEpoch(), LastEvent: now}
	e.sessions[k] = st
	return st
}

func (e *Engine) agent(name string) *AgentState {
	e.touchAgent(name)
	a, ok := e.agents[name]
	if !ok {
		a = &AgentState{Version: StateVersion, Agent: name}
		e.agents[name] = a
	}
	return a
}

// judge collects the breaches of one observation and gives each its
// position in the session's policy stream.
type judge struct {
	st       *SessionState
	cause    string
	at       time.Time
	breaches []Breach
}

// fire adds the breach unless key has fired and not re-armed.
func (j *judge) fire(fired map[string]bool, key, policy string, level Level, value, threshold float64) map[string]bool {
	if fired[key] {
		return fired
	}
	if fired == nil {
		fired = make(map[string]bool)
	}
	fired[key] = true
	j.add(Breach{Policy: policy, Level: level, Value: value, Threshold: threshold})
	return fired
}

// add records b in the session: at the next position of its stream, and
// unsent until the caller reports it delivered.
func (j *judge) add(b Breach) {
	b.Agent, b.Session, b.Cause, b.At = j.st.Agent, j.st.Session, j.cause, j.at
	b.Epoch, b.Seq = j.st.Epoch, j.st.Seq
	j.st.Seq++
	j.st.Unsent = append(j.st.Unsent, b)
	j.breaches = append(j.breaches, b)
}

// limit fires the level value reached under l, once each; a value that
// jumps past both fires only the hard one, and marks the soft one too.
func (j *judge) limit(fired map[string]bool, policy string, l Limit, value float64) map[string]bool {
	level, threshold, ok := l.crossed(value)
	if !ok {
		return fired
	}
	fired = j.fire(fired, policy+"/"+string(level), policy, level, value, threshold)
	if level == Hard && l.Soft > 0 {
		fired[policy+"/"+string(Soft)] = true
	}
	return fired
}

// rearm forgets the fired levels of policy that value is back under, for
// totals that go down (a rolling window).
func rearm(fired map[string]bool, policy string, l Limit, value float64) {
	if l.Soft == 0 || value < l.Soft {
		delete(fired, policy+"/"+string(Soft))
	}
	if l.Hard == 0 || value < l.Hard {
		delete(fired, policy+"/"+string(Hard))
	}
}

// Observe judges one event that arrived at now and returns the breaches
// it crossed. An event without agent and session, or one seen before (a
// redelivery, a retried batch), changes nothing.
func (e *Engine) Observe(ev *aep.Event, now time.Time) []Breach {
	if ev.Agent == "" || ev.Session == "" {
		return nil
	}
	k := SessionKey{ev.Agent, ev.Session}
	if st, ok := e.sessions[k]; ok && slices.Contains(st.Seen, shortHash(ev.Source, ev.ID)) {
		return nil
	}
	rules := e.policies.rules(ev.Agent)
	st := e.session(k, now)
	st.Seen = append(st.Seen, shortHash(ev.Source, ev.ID))
	if len(st.Seen) > seenEvents {
		st.Seen = slices.Delete(st.Seen, 0, len(st.Seen)-seenEvents)
	}
	at, err := time.Parse(time.RFC3339Nano, ev.Time)
	if err != nil {
		at = now
	}
	j := &judge{st: st, cause: ev.ID, at: at}
	// A new event ends a silence: the stuck rule re-arms.
	delete(st.Fired, StuckIdle)
	st.LastEvent, st.LastID = now, ev.ID

	var spent usageSpent
	switch ev.Type {
	case "run.started":
		if st.RunStart == nil {
			st.RunStart = &now
		}
	case "run.finished", "run.failed", "run.cancelled":
		spent = e.runUsage(ev)
		if st.RunStart != nil {
			spent.wall = max(now.Sub(*st.RunStart).Seconds(), 0)
			st.RunStart = nil
		}
		clear(st.OpenTools)
		if ev.Type == "run.failed" && ev.Data["reason"] == "stuck" {
			// The server's own stuck status: its run already ended.
			j.add(Breach{Policy: StuckServer, Level: Soft})
		}
	case "tool.requested":
		e.toolRequested(j, rules, ev, now)
	case "tool.completed", "tool.failed", "tool.denied":
		if _, callID := toolRef(ev); callID != "" {
			delete(st.OpenTools, callID)
		}
	case "session.ended":
		// Its breaches are judged below; its state goes after them.
		defer func() {
			e.touchSession(k)
			delete(e.sessions, k)
		}()
	default:
		if _, ok := usage.ModelCall(ev); ok {
			spent = e.runUsage(ev)
		}
	}
	e.errorStreak(j, rules, ev)
	if spent != (usageSpent{}) {
		st.CostUSD += spent.cost
		st.Tokens += spent.tokens
		st.WallSeconds += spent.wall
		e.spendAgent(j, rules, ev.Agent, spent, now)
	}
	e.sessionBudget(j, rules, st.WallSeconds)
	return j.breaches
}

// usageSpent is what one event adds to the budgets.
type usageSpent struct {
	cost, tokens, wall float64
}

// runUsage reads the tokens and cost of a run terminal or a model call:
// the cost in US dollars as reported, else at the configured prices; a
// cost in another currency is not summed.
func (e *Engine) runUsage(ev *aep.Event) usageSpent {
	var s usageSpent
	for _, attr := range []string{usage.AttrInputTokens, usage.AttrOutputTokens} {
		if n, ok := usage.Tokens(ev, attr); ok {
			s.tokens += float64(n)
		}
	}
	if currency, total, ok := e.policies.Prices.Cost(ev); ok && currency == usage.CurrencyUSD && total >= 0 {
		s.cost = total
	}
	return s
}

// sessionBudget fires the session's budget levels; wall is the session's
// run time so far, the open run's included.
func (e *Engine) sessionBudget(j *judge, rules *Rules, wall float64) {
	st := j.st
	st.Fired = j.limit(st.Fired, BudgetSessionCost, rules.Session.CostUSD, st.CostUSD)
	st.Fired = j.limit(st.Fired, BudgetSessionTokens, rules.Session.Tokens, st.Tokens)
	st.Fired = j.limit(st.Fired, BudgetSessionWallTime, rules.Session.WallTimeSeconds, wall)
}

// spendAgent adds s to the agent's window and fires its budget levels in
// the session whose event crossed them.
func (e *Engine) spendAgent(j *judge, rules *Rules, name string, s usageSpent, now time.Time) {
	a := e.agent(name)
	width := bucketWidth(rules.Window)
	if n := len(a.Buckets); n == 0 || !now.Before(a.Buckets[n-1].Start.Add(width)) {
		a.Buckets = append(a.Buckets, Bucket{Start: now.Truncate(width)})
	}
	b := &a.Buckets[len(a.Buckets)-1]
	b.CostUSD += s.cost
	b.Tokens += s.tokens
	b.WallSeconds += s.wall
	total := a.window(rules.Window, now)
	for _, p := range []struct {
		policy string
		limit  Limit
		value  float64
	}{
		{BudgetAgentCost, rules.Agent.CostUSD, total.CostUSD},
		{BudgetAgentTokens, rules.Agent.Tokens, total.Tokens},
		{BudgetAgentWallTime, rules.Agent.WallTimeSeconds, total.WallSeconds},
	} {
		rearm(a.Fired, p.policy, p.limit, p.value)
		a.Fired = j.limit(a.Fired, p.policy, p.limit, p.value)
	}
}

// windowBuckets is how many buckets a window is cut into: the window
// rolls by a sixtieth of itself.
const windowBuckets = 60

func bucketWidth(window time.Duration) time.Duration {
	return max(window/windowBuckets, time.Second)
}

// window drops the buckets that left the window ending at now and sums
// the rest.
func (a *AgentState) window(window time.Duration, now time.Time) Bucket {
	width := bucketWidth(window)
	from := now.Add(-window)
	a.Buckets = slices.DeleteFunc(a.Buckets, func(b Bucket) bool { return !b.Start.Add(width).After(from) })
	var sum Bucket
	for _, b := range a.Buckets {
		sum.CostUSD += b.CostUSD
		sum.Tokens += b.Tokens
		sum.WallSeconds += b.WallSeconds
	}
	return sum
}

// toolRequested opens the call and judges the loop rule: the same tool
// with the same arguments digest, never the arguments themselves. A
// request without a digest is not judged.
func (e *Engine) toolRequested(j *judge, rules *Rules, ev *aep.Event, now time.Time) {
	st := j.st
	name, callID := toolRef(ev)
	if callID != "" && (len(st.OpenTools) < openToolsMax || st.OpenTools[callID] != "") {
		if st.OpenTools == nil {
			st.OpenTools = make(map[string]string)
		}
		st.OpenTools[callID] = name
	}
	digest, _ := ev.Data["args_digest"].(string)
	if rules.RepeatedTool == 0 || name == "" || digest == "" {
		return
	}
	key := shortHash(name, digest)
	st.Tools = append(st.Tools, ToolUse{Key: key, At: now})
	if len(st.Tools) > recentTools {
		st.Tools = slices.Delete(st.Tools, 0, len(st.Tools)-recentTools)
	}
	count := 0
	for _, u := range st.Tools {
		if u.Key == key && (rules.RepeatWindow == 0 || now.Sub(u.At) < rules.RepeatWindow) {
			count++
		}
	}
	fireKey := LoopTool + "/" + key
	if count < rules.RepeatedTool {
		delete(st.Fired, fireKey) // the loop broke: a new one fires again
		return
	}
	st.Fired = j.fire(st.Fired, fireKey, LoopTool, Hard, float64(count), float64(rules.RepeatedTool))
}

// errorStreak judges the same error N times in a row: a tool's or a run's
// failure or an error.raised, by type (and tool, code or reason); a
// completed tool call or a finished run ends the streak, other events
// between two errors do not.
func (e *Engine) errorStreak(j *judge, rules *Rules, ev *aep.Event) {
	st := j.st
	sig := errorSignature(ev)
	switch {
	case ev.Type == "tool.completed" || ev.Type == "run.finished":
		st.ErrorSig, st.ErrorStreak = "", 0
		delete(st.Fired, LoopError)
		return
	case sig == "":
		return
	case sig == st.ErrorSig:
		st.ErrorStreak++
	default:
		st.ErrorSig, st.ErrorStreak = sig, 1
		delete(st.Fired, LoopError)
	}
	if rules.RepeatedError > 0 && st.ErrorStreak >= rules.RepeatedError {
		st.Fired = j.fire(st.Fired, LoopError, LoopError, Hard, float64(st.ErrorStreak), float64(rules.RepeatedError))
	}
}

func errorSignature(ev *aep.Event) string {
	info, _ := ev.Data["error"].(map[string]any)
	errType, _ := info["type"].(string)
	switch ev.Type {
	case "tool.failed":
		name, _ := toolRef(ev)
		return shortHash(ev.Type, name, errType)
	case "error.raised":
		code, _ := ev.Data["code"].(string)
		return shortHash(ev.Type, errType, code)
	case "run.failed":
		reason, _ := ev.Data["reason"].(string)
		return shortHash(ev.Type, reason, errType)
	}
	return ""
}

// toolRef reads data.tool {name, call_id}.
func toolRef(ev *aep.Event) (name, callID string) {
	tool, _ := ev.Data["tool"].(map[string]any)
	name, _ = tool["name"].(string)
	callID, _ = tool["call_id"].(string)
	return name, callID
}

// Tick judges the time-driven rules at now: a running run quiet past its
// limit, and the session wall-time budget of open runs.
func (e *Engine) Tick(now time.Time) []Breach {
	var out []Breach
	for _, k := range slices.SortedFunc(maps.Keys(e.sessions), compareKeys) {
		st := e.sessions[k]
		if st.RunStart == nil {
			continue
		}
		rules := e.policies.rules(k.Agent)
		if limit, ok := rules.quietLimit(st); ok && !st.Fired[StuckIdle] && now.Sub(st.LastEvent) >= limit {
			e.touchSession(k)
			j := &judge{st: st, cause: st.LastID, at: st.LastEvent.Add(limit)}
			st.Fired = j.fire(st.Fired, StuckIdle, StuckIdle, Soft, now.Sub(st.LastEvent).Seconds(), limit.Seconds())
			out = append(out, j.breaches...)
		}
		wall := rules.Session.WallTimeSeconds
		running := st.WallSeconds + now.Sub(*st.RunStart).Seconds()
		if level, threshold, ok := wall.crossed(running); ok && !st.Fired[BudgetSessionWallTime+"/"+string(level)] {
			e.touchSession(k)
			// The moment the run crossed it, so a retried tick is the same event.
			at := st.RunStart.Add(time.Duration((threshold - st.WallSeconds) * float64(time.Second)))
			j := &judge{st: st, cause: st.LastID, at: at}
			e.sessionBudget(j, rules, running)
			out = append(out, j.breaches...)
		}
	}
	return out
}

// quietLimit is how long st's run may stay quiet: StuckAfter, or while a
// long-running tool call is open, LongRunningAfter (never when unset).
func (r *Rules) quietLimit(st *SessionState) (time.Duration, bool) {
	if r.StuckAfter == 0 {
		return 0, false
	}
	for _, name := range st.OpenTools {
		if slices.Contains(r.LongRunningTools, name) {
			return r.LongRunningAfter, r.LongRunningAfter > 0
		}
	}
	return r.StuckAfter, true
}
