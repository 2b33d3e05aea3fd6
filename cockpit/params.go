package cockpit

import "fmt"

// Params are the bundle's thresholds and timings: every literal an alert
// compares against is one of these, so an operator retunes the bundle by
// generating it with other values (cmd/cockpitgen -params), never by
// editing expressions.
type Params struct {
	// EvaluationInterval is how often Prometheus evaluates the groups.
	EvaluationInterval string `json:"evaluation_interval"`
	// For is how long a condition must hold before most alerts fire.
	For string `json:"for"`
	// AttentionWait is how long a request for a person (an approval, a
	// question) may stay open before AEPAgentWaitingOnPerson fires.
	AttentionWait string `json:"attention_wait"`
	// DailyBudget is what one agent may spend a day, in the currency its
	// cost is reported in.
	DailyBudget float64 `json:"daily_budget"`
	// FastBurn and SlowBurn are the multiples of the daily budget the
	// spend rate is compared with: over 1h (confirmed over 5m) a rate
	// that would spend FastBurn budgets a day pages; over 6h (confirmed
	// over 30m) SlowBurn budgets a day warns.
	FastBurn float64 `json:"fast_burn"`
	SlowBurn float64 `json:"slow_burn"`
	// FailureRatio is the share of tool calls, or of runs, that failed
	// over FailureWindow above which an alert fires, once at least
	// MinCompleted of them ended in that window.
	FailureRatio  float64 `json:"failure_ratio"`
	FailureWindow string  `json:"failure_window"`
	MinCompleted  int     `json:"min_completed"`
	// ErrorWindow is the window the error counters are looked at over.
	ErrorWindow string `json:"error_window"`
	// SocketStalls is how many conversation sockets may stall in an hour
	// before OpenHandsSocketsStalling fires.
	SocketStalls int `json:"socket_stalls"`
	// RelayRedials is how many WebSocket redials to the relay within
	// ErrorWindow mean the link is down.
	RelayRedials int `json:"relay_redials"`
	// QueueFill is the share of an exporter's queue capacity above which
	// its backlog alerts.
	QueueFill float64 `json:"queue_fill"`
	// WebhookUnauthorized is how many POSTs to the webhook sink may fail
	// authentication within ErrorWindow before it alerts.
	WebhookUnauthorized int `json:"webhook_unauthorized"`
	// RunbookURL is where the runbook anchors point: the README of the
	// bundle as the operator's users read it.
	RunbookURL string `json:"runbook_url"`
}

// DefaultParams are the values the committed bundle is generated with.
func DefaultParams() Params {
	return Params{
		EvaluationInterval:  "1m",
		For:                 "5m",
		AttentionWait:       "15m",
		DailyBudget:         100,
		FastBurn:            4,
		SlowBurn:            1,
		FailureRatio:        0.25,
		FailureWindow:       "30m",
		MinCompleted:        10,
		ErrorWindow:         "10m",
		SocketStalls:        5,
		RelayRedials:        3,
		QueueFill:           0.5,
		WebhookUnauthorized: 5,
		RunbookURL:          "https://github.com/otelcol-openhands/otelcol-openhands/blob/main/cockpit/README.md",
	}
}

// num formats a threshold as PromQL and YAML write it: no exponent, no
// trailing zeros.
func num(v float64) string {
	return fmt.Sprintf("%g", v)
}
