package cockpit

import (
	"fmt"
	"strings"
)

// RuleFile is a Prometheus rule file (what `promtool check rules` reads
// and a PrometheusRule's spec holds).
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

type RuleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is a recording rule (Record set) or an alerting rule (Alert set).
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Recording rule names, level:metric:operations as the Prometheus naming
// practice has them. The alerts and the Agents dashboard read these.
const (
	attentionOpen     = "gen_ai_agent_name:aep_attention_open:sum"
	costRate          = "gen_ai_agent_name:aep_run_cost:rate" // + window
	toolFailureRatio  = "gen_ai_agent_name:aep_tool_calls_failed:ratio"
	toolCallsEnded    = "gen_ai_agent_name:aep_tool_calls_ended:increase"
	runFailureRatio   = "gen_ai_agent_name:aep_runs_failed:ratio"
	runsEnded         = "gen_ai_agent_name:aep_runs_ended:increase"
	byAgent           = "instance, gen_ai_agent_name"
	toolTerminals     = "tool.completed|tool.failed|tool.denied"
	runTerminals      = "run.finished|run.failed|run.cancelled"
	attentionAnswered = "attention.resolved|attention.timeout"
)

// costWindows are the burn-rate windows: 1h confirmed by 5m (fast),
// 6h confirmed by 30m (slow).
var costWindows = []string{"5m", "30m", "1h", "6h"}

// eventsOf is the agents' AEP events of the types (a regex), by agent.
func eventsOf(types string) string {
	return fmt.Sprintf(`aep_events_total{aep_type=~%q}`, types)
}

// Recording is the group of recording rules.
func Recording(p Params) RuleGroup {
	requested := fmt.Sprintf(`sum by (%s) (%s)`, byAgent, eventsOf("attention.requested"))
	rules := []Rule{{
		// Requests still open: requested less answered (resolved or timed
		// out); "or requested * 0" keeps an agent none of whose requests
		// was answered yet.
		Record: attentionOpen,
		Expr: fmt.Sprintf("%s\n-\n(sum by (%s) (%s) or %s * 0)",
			requested, byAgent, eventsOf(attentionAnswered), requested),
	}}
	for _, w := range costWindows {
		rules = append(rules, Rule{
			Record: costRate + w,
			Expr:   fmt.Sprintf(`sum by (%s, aep_cost_currency) (rate(aep_run_cost_total[%s]))`, byAgent, w),
		})
	}
	ratio := func(ratioName, endedName, failed, terminals string) []Rule {
		ended := fmt.Sprintf(`sum by (%s) (increase(%s[%s]))`, byAgent, eventsOf(terminals), p.FailureWindow)
		return []Rule{
			{Record: endedName, Expr: ended},
			{Record: ratioName, Expr: fmt.Sprintf("sum by (%s) (increase(%s[%s]))\n/\n%s",
				byAgent, eventsOf(failed), p.FailureWindow, ended)},
		}
	}
	rules = append(rules, ratio(toolFailureRatio, toolCallsEnded, "tool.failed", toolTerminals)...)
	rules = append(rules, ratio(runFailureRatio, runsEnded, "run.failed", runTerminals)...)
	return RuleGroup{Name: "cockpit.recording", Interval: p.EvaluationInterval, Rules: rules}
}

// Alert names, each with a section of the same name in README.md.
const (
	AgentWaitingOnPerson    = "AEPAgentWaitingOnPerson"
	AgentSpendFastBurn      = "AEPAgentSpendFastBurn"
	AgentSpendSlowBurn      = "AEPAgentSpendSlowBurn"
	ToolFailureRatioHigh    = "AEPToolFailureRatioHigh"
	RunFailureRatioHigh     = "AEPRunFailureRatioHigh"
	ServerUnreachable       = "OpenHandsServerUnreachable"
	ConversationsWaiting    = "OpenHandsConversationsWaitingForSocket"
	SocketsStalling         = "OpenHandsSocketsStalling"
	WebhookUnauthorized     = "OpenHandsWebhookUnauthorized"
	RelayLinkDown           = "AEPRelayLinkDown"
	RelayBacklogGrowing     = "AEPRelayBacklogGrowing"
	RelayRefusingEvents     = "AEPRelayRefusingEvents"
	RelayAuthRefused        = "AEPRelayAuthRefused"
	ControlRefusingCommands = "OpenHandsControlRefusingCommands"
	ControlSessionConflict  = "OpenHandsControlSessionConflict"
	ReceiverRefusingData    = "OTelColReceiverRefusingData"
	ExporterSendFailing     = "OTelColExporterSendFailing"
	SessionLogWriteErrors   = "AEPFileWriteErrors"
	ConnectorSeriesDropped  = "AEPConnectorSeriesDropped"
	PolicyHardBreach        = "AEPPolicyHardBreach"
	PolicySoftBreach        = "AEPPolicySoftBreach"
	RelayCommandRefused     = "AEPRelayCommandRefused"
	InboundAEPRefused       = "AEPInboundAEPRefused"
	DiscoverySourceFailing  = "OpenHandsDiscoverySourceFailing"
	severityWarning         = "warning"
	severityCritical        = "critical"
	agentWho                = "agent {{ $labels.gen_ai_agent_name }} (collector {{ $labels.instance }})"
	collectorWho            = "collector {{ $labels.instance }}"
	failedCommandOutcomes   = "unsupported|invalid|refused|busy|unroutable|overloaded"
	relayExporters          = `exporter=~"aeprelay(/.*)?"`
)

// spendSummary names the agent, the window, the burn factor and the budget.
const spendSummary = "%s is spending {{ $value | humanize }} {{ $labels.aep_cost_currency }} a day at the rate of the last %s, more than %s times its daily budget of %s"

// breachSummary names the agent, the policy, the level and the collector.
const breachSummary = "Agent {{ $labels.agent }} breached policy {{ $labels.policy }} (%s) {{ $value | humanize }} time(s) in %s on %s; the guardrail event in its session names the session"

// alert is one alerting rule; its runbook is the README section named
// after it.
func alert(p Params, name, severity, forDuration, expr, summary, description string) Rule {
	return Rule{
		Alert:  name,
		Expr:   expr,
		For:    forDuration,
		Labels: map[string]string{"severity": severity},
		Annotations: map[string]string{
			"summary":     summary,
			"description": description,
			"runbook_url": p.RunbookURL + "#" + strings.ToLower(name),
		},
	}
}

// Alerts is the group of alerting rules.
func Alerts(p Params) RuleGroup {
	// increase: how much the counter series grew over the error window,
	// summed by the labels the summary names, above threshold.
	increase := func(by, series, threshold string) string {
		return fmt.Sprintf(`sum by (%s) (increase(%s[%s])) > %s`, by, series, p.ErrorWindow, threshold)
	}
	// grew: the counter series grew over the error window, by the labels
	// the summary names. A series that first appeared within the window
	// counts with its value: its first sample already holds its first
	// events, which increase cannot see (a rare event, a policy breach or
	// a refused command, is often its series' first).
	grew := func(by, series string) string {
		return fmt.Sprintf("sum by (%s) (increase(%s[%s])) > 0\nor\nsum by (%s) (%s unless %s offset %s)",
			by, series, p.ErrorWindow, by, series, series, p.ErrorWindow)
	}
	breaches := func(level string) string {
		return grew("instance, agent, policy", fmt.Sprintf(`otelcol_aeppolicy_breaches{level=%q}`, level))
	}
	budget := func(burn float64) string { return num(burn * p.DailyBudget) }
	spend := func(long, short string, burn float64) string {
		return fmt.Sprintf("%s%s * 86400 > %s\nand\n%s%s * 86400 > %s",
			costRate, long, budget(burn), costRate, short, budget(burn))
	}
	rules := []Rule{
		alert(p, AgentWaitingOnPerson, severityWarning, p.AttentionWait,
			attentionOpen+" > 0",
			"{{ $value }} request(s) of "+agentWho+" waiting on a person for more than "+p.AttentionWait,
			"An approval or a question has been open longer than the threshold; the agent is idle until someone answers it."),
		alert(p, AgentSpendFastBurn, severityCritical, p.For,
			spend("1h", "5m", p.FastBurn),
			fmt.Sprintf(spendSummary, agentWho, "hour", num(p.FastBurn), num(p.DailyBudget)),
			"At this pace the agent spends its daily budget in a few hours."),
		alert(p, AgentSpendSlowBurn, severityWarning, p.For,
			spend("6h", "30m", p.SlowBurn),
			fmt.Sprintf(spendSummary, agentWho, "6 hours", num(p.SlowBurn), num(p.DailyBudget)),
			"The agent is on course to spend more than its daily budget today."),
		alert(p, ToolFailureRatioHigh, severityWarning, p.For,
			fmt.Sprintf("%s > %s\nand\n%s >= %d", toolFailureRatio, num(p.FailureRatio), toolCallsEnded, p.MinCompleted),
			"{{ $value | humanizePercentage }} of the tool calls of "+agentWho+" failed over the last "+p.FailureWindow,
			"Tool calls keep failing: a broken environment, a missing dependency, a tool the model misuses."),
		alert(p, RunFailureRatioHigh, severityWarning, p.For,
			fmt.Sprintf("%s > %s\nand\n%s >= %d", runFailureRatio, num(p.FailureRatio), runsEnded, p.MinCompleted),
			"{{ $value | humanizePercentage }} of the runs of "+agentWho+" failed over the last "+p.FailureWindow,
			"Runs end in failure: the model endpoint, its credentials or the agent's sandbox."),
		alert(p, ServerUnreachable, severityCritical, p.For,
			`max by (instance, server) (otelcol_openhands_server_up) == 0`,
			"Agent server {{ $labels.server }} does not answer the conversation search of "+collectorWho,
			"The server is down, unreachable, or refuses the session key: its conversations are not observed."),
		alert(p, ConversationsWaiting, severityWarning, p.For,
			`max by (instance, server) (otelcol_openhands_conversations_overflow) > 0`,
			"{{ $value }} conversation(s) of agent server {{ $labels.server }} wait for a socket on "+collectorWho,
			"The server has more conversations than max_conversations allows the collector to attach; their events are late."),
		alert(p, SocketsStalling, severityWarning, p.For,
			fmt.Sprintf(`sum by (instance, cause) (increase(otelcol_openhands_socket_stalls[1h])) > %d`, p.SocketStalls),
			"Conversation sockets of "+collectorWho+" stalled {{ $value | humanize }} times in an hour (cause {{ $labels.cause }})",
			"Sockets to the agent servers go silent and are redialled: a proxy or load balancer between them drops idle or long-lived connections."),
		alert(p, WebhookUnauthorized, severityWarning, p.For,
			increase("instance, server", `otelcol_openhands_webhook_requests{outcome="unauthorized"}`, fmt.Sprint(p.WebhookUnauthorized)),
			"{{ $value | humanize }} POSTs to the webhook sink of "+collectorWho+" failed authentication (server \"{{ $labels.server }}\")",
			"Someone posts to the webhook sink without a valid key: a misconfigured agent server, or a probe."),
		alert(p, RelayLinkDown, severityCritical, p.For,
			fmt.Sprintf(`sum by (instance) (increase(otelcol_aeprelay_reconnects[%s])) >= %d`, p.ErrorWindow, p.RelayRedials),
			"The AEP relay link of "+collectorWho+" redialled {{ $value | humanize }} times in "+p.ErrorWindow,
			"The relay is unreachable or drops the link; events queue in the exporter until it is back."),
		alert(p, RelayBacklogGrowing, severityWarning, p.For,
			fmt.Sprintf("max by (instance, exporter) (\n  otelcol_exporter_queue_size{%s}\n  /\n  otelcol_exporter_queue_capacity{%s}\n) > %s",
				relayExporters, relayExporters, num(p.QueueFill)),
			"The queue of {{ $labels.exporter }} on "+collectorWho+" is {{ $value | humanizePercentage }} full",
			"The relay takes events slower than the agents make them, or not at all; when the queue is full, events are dropped."),
		alert(p, RelayRefusingEvents, severityWarning, p.For,
			increase("instance, code", `otelcol_aeprelay_events_rejected{reason="relay_refused"}`, "0"),
			"The AEP relay refused {{ $value | humanize }} events of "+collectorWho+" (code {{ $labels.code }})",
			"The relay answered events with an error; they are dropped."),
		alert(p, RelayAuthRefused, severityCritical, p.For,
			increase("instance, transport, status_code", "otelcol_aeprelay_auth_refused", "0"),
			"The AEP relay refused the credentials of "+collectorWho+" ({{ $labels.status_code }} over {{ $labels.transport }})",
			"The relay token or auth extension is wrong or expired; nothing reaches the relay."),
		alert(p, ControlRefusingCommands, severityWarning, p.For,
			increase("instance, type, outcome", fmt.Sprintf(`otelcol_openhandscontrol_commands{outcome=~%q}`, failedCommandOutcomes), "0"),
			"The control gate of "+collectorWho+" refused {{ $value | humanize }} {{ $labels.type }} command(s): {{ $labels.outcome }}",
			"Commands from the relay are refused; operators steering agents see their commands fail."),
		alert(p, ControlSessionConflict, severityWarning, p.For,
			increase("instance", "otelcol_openhandscontrol_session_conflicts", "0"),
			"The control gate of "+collectorWho+" refused {{ $value | humanize }} command(s): more than one conversation claims their session",
			"Two observed conversations claim one session, so no command for it can be routed."),
		alert(p, ReceiverRefusingData, severityCritical, p.For,
			increase("instance, receiver, transport", "otelcol_receiver_refused_log_records", "0"),
			"Receiver {{ $labels.receiver }} of "+collectorWho+" refused {{ $value | humanize }} log records",
			"The pipeline refused records for good (or the collector stopped while retrying them): data is lost."),
		alert(p, ExporterSendFailing, severityCritical, p.For,
			increase("instance, exporter", "otelcol_exporter_send_failed_log_records", "0"),
			"Exporter {{ $labels.exporter }} of "+collectorWho+" dropped {{ $value | humanize }} log records it could not send",
			"An exporter gave up on records after its retries: data is lost."),
		alert(p, SessionLogWriteErrors, severityWarning, p.For,
			increase("instance", "otelcol_aepfile_write_errors", "0"),
			"The aepfile exporter of "+collectorWho+" failed {{ $value | humanize }} file operations on the session logs",
			"Session logs cannot be written: a full or read-only disk, permissions, too many open files."),
		alert(p, ConnectorSeriesDropped, severityWarning, p.For,
			increase("instance", "otelcol_aep_connector_series_dropped", "0"),
			"The aep connector of "+collectorWho+" dropped {{ $value | humanize }} metric points at max_series",
			"The agents' metrics have more series than the connector keeps; the newest are dropped."),
		alert(p, PolicyHardBreach, severityCritical, p.For,
			breaches("hard"),
			fmt.Sprintf(breachSummary, "hard", p.ErrorWindow, collectorWho),
			"An agent crossed a hard threshold of the aeppolicy processor (a budget, a loop); where the policy says action: pause, its conversation was paused."),
		alert(p, PolicySoftBreach, severityWarning, p.For,
			breaches("soft"),
			fmt.Sprintf(breachSummary, "soft", p.ErrorWindow, collectorWho),
			"An agent crossed a soft threshold of the aeppolicy processor (a budget) or looks stuck: a notice before the hard threshold."),
		alert(p, RelayCommandRefused, severityCritical, p.For,
			grew("instance, transport", "otelcol_aeprelay_commands_refused"),
			"The aeprelay exporter of "+collectorWho+" refused to send {{ $value | humanize }} control command(s) over {{ $labels.transport }}: a receiver of its pipeline took commands from outside",
			"Someone pushed commands through a data path (OTLP, an AEP POST, a webhook); the exporter refused them, but the door they came through is open."),
		alert(p, InboundAEPRefused, severityWarning, p.For,
			grew("instance", "otelcol_aepinbound_aep_refused"),
			"The aepinbound processor of "+collectorWho+" removed {{ $value | humanize }} record(s) that already were AEP from its OTLP input",
			"An OTLP client sent AEP records (a command among them, perhaps) where only Codex's and VS Code's own logs belong."),
		alert(p, DiscoverySourceFailing, severityWarning, p.For,
			fmt.Sprintf("sum by (instance, source) (increase(otelcol_openhands_target_refreshes{outcome=\"failed\"}[%s])) > 0\nunless\nsum by (instance, source) (increase(otelcol_openhands_target_refreshes{outcome=\"ok\"}[%s])) > 0",
				p.ErrorWindow, p.ErrorWindow),
			"Discovery source {{ $labels.source }} of "+collectorWho+" failed every refresh for "+p.ErrorWindow,
			"The source's last good set of agent servers stands: servers it added since are not watched, servers it dropped are still watched."),
	}
	return RuleGroup{Name: "cockpit.alerts", Interval: p.EvaluationInterval, Rules: rules}
}
