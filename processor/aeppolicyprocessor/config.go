package aeppolicyprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor/internal/policy"
)

// Config is the aeppolicy processor's configuration.
type Config struct {
	// Default are the policies of every agent Agents does not name.
	Default RulesConfig `mapstructure:"default"`
	// Agents are agents' own policies, by AEP agent (openhands, codex,
	// vscode, ...); an agent's entry replaces Default as a whole.
	Agents map[string]RulesConfig `mapstructure:"agents"`
	// Prices cost the model calls that report tokens but no cost, as the
	// aep connector's prices do.
	Prices usage.Prices `mapstructure:"prices"`
	// SourceHost is the authority of the processor's own AEP sources,
	// aep://{source_host}/agent/{agent}/session/{session}: it must differ
	// from every other emitter's, so that the guardrail events are
	// ordered in a stream of their own.
	SourceHost string `mapstructure:"source_host"`
	// CheckInterval is how often the time-driven rules (stuck, the wall
	// time of open runs) are judged.
	CheckInterval time.Duration `mapstructure:"check_interval"`
	// MaxSessions bounds the sessions judged at once; the longest quiet
	// one is forgotten first.
	MaxSessions int `mapstructure:"max_sessions"`
	// Storage is the id of a storage extension (e.g. file_storage) that
	// keeps totals and breaches across restarts; nil keeps none.
	Storage *component.ID `mapstructure:"storage"`
	// Control is the id of the openhandscontrol extension that executes
	// the pause of an action: pause policy set.
	Control *component.ID `mapstructure:"control"`

	_ struct{}
}

// RulesConfig are one agent's policies.
type RulesConfig struct {
	Session BudgetConfig      `mapstructure:"session"`
	Agent   AgentBudgetConfig `mapstructure:"agent"`
	Loop    LoopConfig        `mapstructure:"loop"`
	Stuck   StuckConfig       `mapstructure:"stuck"`
	// Action is what a hard breach does beside being recorded: "" (none)
	// or pause (the OpenHands conversation, through the control gate).
	Action string `mapstructure:"action"`

	_ struct{}
}

// actionPause pauses the conversation of a hard breach.
const actionPause = "pause"

// BudgetConfig limits cost, tokens and the time runs run. Each limit has
// a soft threshold (notify) and a hard one (act); unset is off.
type BudgetConfig struct {
	CostUSD  LimitConfig         `mapstructure:"cost_usd"`
	Tokens   LimitConfig         `mapstructure:"tokens"`
	WallTime DurationLimitConfig `mapstructure:"wall_time"`

	_ struct{}
}

// AgentBudgetConfig is an agent's budget over a rolling window.
type AgentBudgetConfig struct {
	BudgetConfig `mapstructure:",squash"`
	Window       time.Duration `mapstructure:"window"`

	_ struct{}
}

// LimitConfig is a soft and a hard threshold.
type LimitConfig struct {
	Soft float64 `mapstructure:"soft"`
	Hard float64 `mapstructure:"hard"`

	_ struct{}
}

// DurationLimitConfig is a soft and a hard threshold of time.
type DurationLimitConfig struct {
	Soft time.Duration `mapstructure:"soft"`
	Hard time.Duration `mapstructure:"hard"`

	_ struct{}
}

// LoopConfig detects an agent repeating itself.
type LoopConfig struct {
	// RepeatedTool: the same tool with the same arguments digest this many
	// times within Window; 0 is off.
	RepeatedTool int           `mapstructure:"repeated_tool"`
	Window       time.Duration `mapstructure:"window"`
	// RepeatedError: the same error this many times in a row; 0 is off.
	RepeatedError int `mapstructure:"repeated_error"`

	_ struct{}
}

// StuckConfig detects a running run that went quiet.
type StuckConfig struct {
	// After is the silence that makes a running run stuck; 0 is off.
	After time.Duration `mapstructure:"after"`
	// LongRunningTools are tools whose open call holds the rule off.
	LongRunningTools []string `mapstructure:"long_running_tools"`
	// LongRunningAfter, when set, is the silence such a call may keep.
	LongRunningAfter time.Duration `mapstructure:"long_running_after"`

	_ struct{}
}

// Validate checks the configuration; every message names its key.
func (cfg *Config) Validate() error {
	var errs []error
	errs = append(errs, cfg.Default.validate("default")...)
	for _, agent := range slices.Sorted(maps.Keys(cfg.Agents)) {
		if agent == "" {
			errs = append(errs, errors.New("agents: an agent name must not be empty"))
		}
		r := cfg.Agents[agent]
		errs = append(errs, r.validate(fmt.Sprintf("agents[%q]", agent))...)
	}
	errs = append(errs, cfg.Prices.Validate("prices")...)
	if cfg.pauses() && cfg.Control == nil {
		errs = append(errs, errors.New("control: an openhandscontrol extension is required where a policy's action is pause"))
	}
	if !configcheck.IsHostName(cfg.SourceHost) {
		errs = append(errs, fmt.Errorf("source_host: %q is not a host name", cfg.SourceHost))
	}
	errs = append(errs, configcheck.Check(configcheck.Duration{Key: "check_interval", Value: cfg.CheckInterval, Positive: true})...)
	if cfg.MaxSessions < 1 {
		errs = append(errs, errors.New("max_sessions: must be at least 1"))
	}
	return errors.Join(errs...)
}

func (r *RulesConfig) validate(key string) []error {
	var errs []error
	var durations []configcheck.Duration
	configcheck.WalkDurations(r, func(k string, d *time.Duration) {
		durations = append(durations, configcheck.Duration{Key: key + "." + k, Value: *d})
	})
	errs = append(errs, configcheck.Check(durations...)...)
	for _, b := range []struct {
		key    string
		budget *BudgetConfig
	}{{"session", &r.Session}, {"agent", &r.Agent.BudgetConfig}} {
		errs = append(errs, b.budget.validate(key+"."+b.key)...)
	}
	if r.Agent.BudgetConfig.set() && r.Agent.Window <= 0 {
		errs = append(errs, fmt.Errorf("%s.agent.window: must be positive when an agent budget is set", key))
	}
	if r.Loop.RepeatedTool < 0 || r.Loop.RepeatedTool == 1 || r.Loop.RepeatedTool > policy.MaxRepeatedTool {
		errs = append(errs, fmt.Errorf("%s.loop.repeated_tool: must be 0 (off) or 2 to %d, got %d", key, policy.MaxRepeatedTool, r.Loop.RepeatedTool))
	}
	if r.Loop.RepeatedError < 0 || r.Loop.RepeatedError == 1 {
		errs = append(errs, fmt.Errorf("%s.loop.repeated_error: must be 0 (off) or at least 2, got %d", key, r.Loop.RepeatedError))
	}
	if r.Action != "" && r.Action != actionPause {
		errs = append(errs, fmt.Errorf("%s.action: must be empty or pause, got %q", key, r.Action))
	}
	for i, name := range r.Stuck.LongRunningTools {
		if name == "" {
			errs = append(errs, fmt.Errorf("%s.stuck.long_running_tools[%d]: must not be empty", key, i))
		}
	}
	return errs
}

func (b *BudgetConfig) validate(key string) []error {
	var errs []error
	for _, l := range []struct {
		key        string
		soft, hard float64
	}{{"cost_usd", b.CostUSD.Soft, b.CostUSD.Hard}, {"tokens", b.Tokens.Soft, b.Tokens.Hard}} {
		for _, v := range []struct {
			name  string
			value float64
		}{{"soft", l.soft}, {"hard", l.hard}} {
			if !(v.value >= 0 && !math.IsInf(v.value, 0)) {
				errs = append(errs, fmt.Errorf("%s.%s.%s: must be a non-negative number, got %v", key, l.key, v.name, v.value))
			}
		}
		if l.soft > 0 && l.hard > 0 && l.soft >= l.hard {
			errs = append(errs, fmt.Errorf("%s.%s.soft: must be below hard (%v), got %v", key, l.key, l.hard, l.soft))
		}
	}
	// wall_time's signs are checked with the other durations.
	if w := b.WallTime; w.Soft > 0 && w.Hard > 0 && w.Soft >= w.Hard {
		errs = append(errs, fmt.Errorf("%s.wall_time.soft: must be below hard (%s), got %s", key, w.Hard, w.Soft))
	}
	return errs
}

func (b *BudgetConfig) set() bool {
	return b.CostUSD != (LimitConfig{}) || b.Tokens != (LimitConfig{}) || b.WallTime != (DurationLimitConfig{})
}

// rulesOf is the policy set of agent.
func (cfg *Config) rulesOf(agent string) *RulesConfig {
	if r, ok := cfg.Agents[agent]; ok {
		return &r
	}
	return &cfg.Default
}

// pauses reports whether any policy set pauses.
func (cfg *Config) pauses() bool {
	if cfg.Default.Action == actionPause {
		return true
	}
	for _, r := range cfg.Agents {
		if r.Action == actionPause {
			return true
		}
	}
	return false
}

// policies is the engine's view of the configuration.
func (cfg *Config) policies() *policy.Policies {
	p := &policy.Policies{Default: cfg.Default.rules(), Prices: cfg.Prices, Agents: make(map[string]policy.Rules, len(cfg.Agents))}
	for agent, r := range cfg.Agents {
		p.Agents[agent] = r.rules()
	}
	return p
}

func (r *RulesConfig) rules() policy.Rules {
	return policy.Rules{
		Session:          r.Session.budget(),
		Agent:            r.Agent.BudgetConfig.budget(),
		Window:           r.Agent.Window,
		RepeatedTool:     r.Loop.RepeatedTool,
		RepeatWindow:     r.Loop.Window,
		RepeatedError:    r.Loop.RepeatedError,
		StuckAfter:       r.Stuck.After,
		LongRunningTools: r.Stuck.LongRunningTools,
		LongRunningAfter: r.Stuck.LongRunningAfter,
	}
}

func (b *BudgetConfig) budget() policy.Budget {
	return policy.Budget{
		CostUSD:         policy.Limit{Soft: b.CostUSD.Soft, Hard: b.CostUSD.Hard},
		Tokens:          policy.Limit{Soft: b.Tokens.Soft, Hard: b.Tokens.Hard},
		WallTimeSeconds: policy.Limit{Soft: b.WallTime.Soft.Seconds(), Hard: b.WallTime.Hard.Seconds()},
	}
}
