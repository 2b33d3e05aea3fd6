// Package policy is the arithmetic of the aeppolicy processor: budgets,
// loops and stuck runs over a stream of AEP events, and the breaches they
// cross. It has no I/O and no clock: the caller passes each event with the
// time it arrived, ticks the engine for the stuck rule, and persists the
// state the engine reports changed.
package policy // import "github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor/internal/policy"

import (
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

// Level is how far a value went: past the soft threshold (notify) or the
// hard one (act).
type Level string

const (
	Soft Level = "soft"
	Hard Level = "hard"
)

// Limit is a soft and a hard threshold; 0 leaves a threshold off.
type Limit struct {
	Soft, Hard float64
}

// crossed is the highest level v has reached, and its threshold.
func (l Limit) crossed(v float64) (Level, float64, bool) {
	switch {
	case l.Hard > 0 && v >= l.Hard:
		return Hard, l.Hard, true
	case l.Soft > 0 && v >= l.Soft:
		return Soft, l.Soft, true
	}
	return "", 0, false
}

// Budget limits what a session, or an agent over a window, may spend.
type Budget struct {
	// CostUSD is in US dollars, as reported or at the configured prices.
	CostUSD Limit
	// Tokens counts input and output tokens.
	Tokens Limit
	// WallTimeSeconds is the time runs were running.
	WallTimeSeconds Limit
}

// Rules are one agent's policies.
type Rules struct {
	Session Budget
	// Agent is the agent's budget over the rolling Window.
	Agent  Budget
	Window time.Duration

	// RepeatedTool flags the same tool with the same arguments digest
	// requested this many times within RepeatWindow; 0 is off.
	RepeatedTool int
	RepeatWindow time.Duration
	// RepeatedError flags the same error this many times in a row; 0 is off.
	RepeatedError int

	// StuckAfter flags a running run with no event for this long; 0 is off.
	StuckAfter time.Duration
	// LongRunningTools are tools whose open call (a build, a test suite)
	// holds the stuck rule off; LongRunningAfter, when set, is how long
	// such a call may stay quiet before the run counts as stuck after all.
	LongRunningTools []string
	LongRunningAfter time.Duration
}

// Policies are the default rules, agents' own, and the prices that cost
// tokens reported without a cost.
type Policies struct {
	Default Rules
	Agents  map[string]Rules
	Prices  usage.Prices
}

func (p *Policies) rules(agent string) *Rules {
	if r, ok := p.Agents[agent]; ok {
		return &r
	}
	return &p.Default
}

// Policy names: the guardrail's category, the metric's policy attribute.
const (
	BudgetSessionCost     = "budget.session.cost"
	BudgetSessionTokens   = "budget.session.tokens"
	BudgetSessionWallTime = "budget.session.wall_time"
	BudgetAgentCost       = "budget.agent.cost"
	BudgetAgentTokens     = "budget.agent.tokens"
	BudgetAgentWallTime   = "budget.agent.wall_time"
	LoopTool              = "loop.tool"
	LoopError             = "loop.error"
	StuckIdle             = "stuck.idle"
	StuckServer           = "stuck.server"
)

// Breach is one policy crossed in one session, once.
type Breach struct {
	Agent, Session string
	Policy         string
	Level          Level
	// Value is what crossed Threshold: dollars, tokens, seconds, a count.
	Value, Threshold float64
	// Cause is the id of the event that crossed it; for a stuck run, the
	// last event before the silence.
	Cause string
	// At is when it was crossed: the cause's time, or for a stuck run the
	// moment the silence reached its limit, so that the same breach found
	// again after a retry is the same event.
	At time.Time
	// Epoch and Seq are the breach event's position in the policy
	// engine's own stream of the session.
	Epoch, Seq int64
}
