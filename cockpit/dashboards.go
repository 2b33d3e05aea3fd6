package cockpit

import (
	"fmt"
	"net/url"
	"strings"
)

var (
	prometheusDS = &Datasource{Type: "prometheus", UID: "${datasource}"}
	tracesDS     = &Datasource{Type: "tempo", UID: "${traces}"}
)

// Grafana units (the "Standard options > Unit" ids).
const (
	unitCount   = "short"
	unitRate    = "ops"
	unitSeconds = "s"
	unitBytes   = "bytes"
	unitRatio   = "percentunit"
)

// rateInterval is the window of every rate and increase on the
// dashboards: Grafana's, adapted to the scrape interval and the zoom.
const rateInterval = "$__rate_interval"

// board lays panels out left to right in rows of 24 columns.
type board struct {
	panels []Panel
	x, y   int
	rowH   int
}

func (b *board) row(title string) {
	b.wrap()
	collapsed := false
	b.panels = append(b.panels, Panel{Type: "row", Title: title, GridPos: GridPos{H: 1, W: 24, Y: b.y}, Collapsed: &collapsed, Panels: &[]Panel{}})
	b.y++
}

func (b *board) wrap() {
	if b.x > 0 {
		b.x, b.y, b.rowH = 0, b.y+b.rowH, 0
	}
}

func (b *board) add(w, h int, p Panel) {
	if b.x+w > 24 {
		b.wrap()
	}
	p.GridPos = GridPos{H: h, W: w, X: b.x, Y: b.y}
	b.x += w
	b.rowH = max(b.rowH, h)
	b.panels = append(b.panels, p)
}

// numbered gives every panel its id, in layout order.
func (b *board) numbered() []Panel {
	for i := range b.panels {
		b.panels[i].ID = i + 1
	}
	return b.panels
}

// query is one PromQL target; legend "" lets Grafana name the series.
func query(expr, legend string) Target {
	return Target{Expr: expr, LegendFormat: legend, Range: true}
}

func chart(title, unit, description string, targets ...Target) Panel {
	for i := range targets {
		targets[i].RefID = string(rune('A' + i))
		targets[i].Datasource = prometheusDS
	}
	return Panel{
		Type: "timeseries", Title: title, Description: description, Datasource: prometheusDS, Targets: targets,
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{Unit: unit}, Overrides: []FieldOverride{}},
		Options: map[string]any{
			"legend":  map[string]any{"showLegend": true, "displayMode": "table", "placement": "bottom", "calcs": []string{"lastNotNull", "max"}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		},
	}
}

// quantiles charts the median, 90th and 99th percentiles of a histogram's
// buckets (the _bucket series with its selector), by the labels in by.
func quantiles(title, description, buckets, by, legend string) Panel {
	var targets []Target
	for _, q := range []string{"0.5", "0.9", "0.99"} {
		targets = append(targets, query(
			fmt.Sprintf("histogram_quantile(%s, sum by (le%s) (rate(%s[%s])))", q, by, buckets, rateInterval),
			"p"+strings.TrimPrefix(q, "0.")+" "+legend))
	}
	return chart(title, unitSeconds, description, targets...)
}

// datasourceVariable picks a data source of the plugin; empty, Grafana
// opens the dashboard on the default one.
func datasourceVariable(name, label, plugin string) Variable {
	return Variable{Name: name, Label: label, Type: "datasource", Query: plugin, Refresh: 1, Current: Current{Text: "", Value: ""}}
}

// labelVariable offers the values of label on metric, several at once,
// "All" matching every value (the empty one included).
func labelVariable(name, label, metric, labelName string) Variable {
	definition := fmt.Sprintf("label_values(%s, %s)", metric, labelName)
	return Variable{
		Name: name, Label: label, Type: "query", Datasource: prometheusDS,
		Query:      map[string]any{"query": definition, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
		Definition: definition, Refresh: 2, IncludeAll: true, AllValue: ".*", Multi: true, Sort: 1,
		Current: Current{Text: []string{"All"}, Value: []string{"$__all"}},
	}
}

func dashboard(uid, title, description string, variables []Variable, panels []Panel) Dashboard {
	return Dashboard{
		UID: uid, Title: title, Description: description, Tags: []string{"otelcol-openhands", "aep"},
		Editable: true, GraphTooltip: 1, Refresh: "30s", SchemaVersion: 39,
		Time: TimeRange{From: "now-6h", To: "now"}, Timezone: "browser",
		Templating:  Templating{List: variables},
		Annotations: Annotations{List: []any{}},
		Links: []Link{{Title: "otelcol-openhands", Type: "dashboards", Icon: "external link", Tags: []string{"otelcol-openhands"},
			AsDropdown: true, IncludeVars: true, KeepTime: true}},
		Panels:  panels,
		Version: 1,
	}
}

// Agents is the agents' dashboard: sessions, runs, tools, attention,
// tokens and cost, from the aep connector's metrics; policy breaches from
// the aeppolicy processor's.
func Agents(p Params) Dashboard {
	sel := `gen_ai_agent_name=~"$agent", instance=~"$instance"`
	events := func(types string) string {
		return fmt.Sprintf(`aep_events_total{aep_type=~%q, %s}`, types, sel)
	}
	perInterval := func(series, by string) string {
		return fmt.Sprintf("sum by (%s) (increase(%s[%s]))", by, series, rateInterval)
	}
	started, ended := events("session.started"), events("session.ended")
	var b board
	b.row("Sessions and runs")
	b.add(8, 8, chart("Sessions active", unitCount,
		"Sessions started less sessions ended since the collector started, per agent.",
		query(fmt.Sprintf("sum by (gen_ai_agent_name) (%s)\n-\n(sum by (gen_ai_agent_name) (%s) or sum by (gen_ai_agent_name) (%s) * 0)",
			started, ended, started), "{{gen_ai_agent_name}}")))
	b.add(8, 8, chart("Sessions started", unitCount, "Sessions started per interval, per agent.",
		query(perInterval(started, "gen_ai_agent_name"), "{{gen_ai_agent_name}}")))
	b.add(8, 8, chart("Runs", unitCount, "Runs started and ended (finished, failed, cancelled) per interval.",
		query(perInterval(events("run.started|"+runTerminals), "gen_ai_agent_name, aep_type"), "{{gen_ai_agent_name}} {{aep_type}}")))
	b.add(12, 8, quantiles("Run duration", "Percentiles of run duration (runs with a known start).",
		fmt.Sprintf(`gen_ai_client_operation_duration_seconds_bucket{gen_ai_operation_name="invoke_agent", %s}`, sel),
		", gen_ai_agent_name", "{{gen_ai_agent_name}}"))
	b.add(12, 8, chart("Run failure ratio", unitRatio,
		fmt.Sprintf("Share of the runs ended over %s that failed (recording rule %s).", p.FailureWindow, runFailureRatio),
		query(fmt.Sprintf("%s{%s}", runFailureRatio, sel), "{{gen_ai_agent_name}}")))

	b.row("Tool calls")
	b.add(12, 8, chart("Tool calls by tool and outcome", unitCount, "Tool calls with a known start, per interval.",
		query(perInterval(fmt.Sprintf(`gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="execute_tool", %s}`, sel),
			"gen_ai_tool_name, aep_outcome"), "{{gen_ai_tool_name}} {{aep_outcome}}")))
	b.add(12, 8, chart("Tool failure ratio", unitRatio,
		fmt.Sprintf("Share of the tool calls ended over %s that failed (recording rule %s).", p.FailureWindow, toolFailureRatio),
		query(fmt.Sprintf("%s{%s}", toolFailureRatio, sel), "{{gen_ai_agent_name}}")))

	b.row("Attention")
	b.add(8, 8, chart("Requests open now", unitCount,
		"Approvals and questions waiting on a person (recording rule "+attentionOpen+").",
		query(fmt.Sprintf("sum by (gen_ai_agent_name) (%s{%s})", attentionOpen, sel), "{{gen_ai_agent_name}}")))
	b.add(8, 8, quantiles("Time to answer", "Percentiles of the wait from a request to its answer or timeout.",
		fmt.Sprintf("aep_attention_wait_duration_seconds_bucket{%s}", sel), "", "{{gen_ai_agent_name}}"))
	b.add(8, 8, chart("Answers by outcome", unitCount,
		"Requests answered, by resolution, and timed out (outcome timeout), per interval. Whether a person or a policy decided is on the attention.resolved event and its span.",
		query(perInterval(fmt.Sprintf("aep_attention_wait_duration_seconds_count{%s}", sel), "gen_ai_agent_name, aep_outcome"),
			"{{gen_ai_agent_name}} {{aep_outcome}}")))

	b.row("Tokens and cost")
	b.add(8, 8, chart("Tokens", unitCount, "Input and output tokens per interval, as the runs reported them at their end.",
		query(perInterval(fmt.Sprintf("gen_ai_client_token_usage_sum{%s}", sel), "gen_ai_agent_name, gen_ai_token_type"),
			"{{gen_ai_agent_name}} {{gen_ai_token_type}}")))
	b.add(8, 8, chart("Cost", unitCount, "Cost per interval, in the currency the agent reports.",
		query(perInterval(fmt.Sprintf("aep_run_cost_total{%s}", sel), "gen_ai_agent_name, aep_cost_currency"),
			"{{gen_ai_agent_name}} {{aep_cost_currency}}")))
	b.add(8, 8, chart("Daily spend at the last hour's rate", unitCount,
		fmt.Sprintf("What the agent would spend in a day at the last hour's rate; the budget alerts compare it with %s a day.", num(p.DailyBudget)),
		query(fmt.Sprintf("%s1h{%s} * 86400", costRate, sel), "{{gen_ai_agent_name}} {{aep_cost_currency}}")))
	b.add(12, 8, chart("Tokens by model", unitCount,
		"Input and output tokens per interval by the model the events name (gen_ai.request.model: Codex's and VS Code's model calls, runs whose events name it; empty where none does).",
		query(perInterval(fmt.Sprintf("gen_ai_client_token_usage_sum{%s}", sel), "gen_ai_request_model, gen_ai_token_type"),
			"{{gen_ai_request_model}} {{gen_ai_token_type}}")))
	b.add(12, 8, chart("Cost by model", unitCount,
		"Cost per interval by model: reported by the event, or its tokens at the connector's prices.",
		query(perInterval(fmt.Sprintf("aep_run_cost_total{%s}", sel), "gen_ai_request_model, aep_cost_currency"),
			"{{gen_ai_request_model}} {{aep_cost_currency}}")))
	b.add(24, 10, topSessionsByCost())

	// The aeppolicy processor's counters are the collector's own telemetry
	// (another scrape target than the connector's metrics, so not filtered
	// by collector). They are charted as totals: a breach is a rare event,
	// often its series' first point, which an increase cannot see.
	policy := `agent=~"$agent"`
	b.row("Policies (aeppolicy processor)")
	b.add(12, 8, chart("Policy breaches by policy and level", unitCount,
		"Breaches recorded since the collector started, per agent, policy and level (soft: a notice; hard: acted on where the policy says action: pause). The guardrail event in the session says which session.",
		query(fmt.Sprintf("sum by (agent, policy, level) (otelcol_aeppolicy_breaches{%s})", policy), "{{agent}} {{policy}} {{level}}")))
	b.add(12, 8, chart("Policy actions by outcome", unitCount,
		"Actions of hard breaches since the collector started: originated (a pause handed to the control gate), gate_closed (nothing sent), failed.",
		query(fmt.Sprintf("sum by (agent, policy, action, outcome) (otelcol_aeppolicy_actions{%s})", policy), "{{agent}} {{policy}} {{action}} {{outcome}}")))

	return dashboard("otelcol-openhands-agents", "otelcol-openhands / Agents",
		"What the agents do: sessions, runs, tool calls, requests for a person, tokens and cost by agent and model (aep connector metrics), policy breaches and their actions (aeppolicy processor).",
		[]Variable{
			datasourceVariable("datasource", "Metrics", "prometheus"),
			datasourceVariable("traces", "Traces", "tempo"),
			labelVariable("instance", "Collector", "aep_events_total", "instance"),
			labelVariable("agent", "Agent", "aep_events_total", "gen_ai_agent_name"),
		}, b.numbered())
}

// topSessionsByCost lists the runs of the selected agents from the traces
// backend, costliest first; session.id links to the session's traces
// (metrics carry no session id: one series per session would not end).
func topSessionsByCost() Panel {
	traceQL := `{ span.gen_ai.operation.name = "invoke_agent" && span.gen_ai.agent.name =~ "$agent" } | select(span.session.id, span.aep.cost.total)`
	left := fmt.Sprintf(`{"datasource":"${traces}","queries":[{"refId":"A","queryType":"traceql","query":"{ span.session.id = \"%s\" }"}],"range":{"from":"${__from}","to":"${__to}"}}`,
		"${__value.raw}")
	return Panel{
		Type: "table", Title: "Top sessions by cost",
		Description: "Runs of the selected agents from the traces backend with their session and cost; sort by aep.cost.total. A session.id opens its traces.",
		Datasource:  tracesDS,
		Targets:     []Target{{RefID: "A", Datasource: tracesDS, QueryType: "traceql", Query: traceQL, TableType: "spans", Limit: 100, Filters: &[]any{}}},
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{},
			Overrides: []FieldOverride{{
				Matcher: Matcher{ID: "byName", Options: "session.id"},
				Properties: []Property{{ID: "links", Value: []DataLink{{
					Title: "Traces of session ${__value.raw}",
					URL:   "/explore?left=" + url.QueryEscape(left),
				}}}},
			}},
		},
		Options: map[string]any{"showHeader": true, "frameIndex": 0, "sortBy": []map[string]any{{"displayName": "aep.cost.total", "desc": true}}},
	}
}

// Collector is the collectors' dashboard: agent servers, the relay, the
// session logs, the control gate and the process.
func Collector() Dashboard {
	sel := `instance=~"$instance"`
	server := sel + `, server=~"$server"`
	rate := func(series, by string) string {
		return fmt.Sprintf("sum by (%s) (rate(%s[%s]))", by, series, rateInterval)
	}
	var b board
	b.row("Agent servers (openhands receiver)")
	b.add(8, 8, chart("Agent servers reached", unitCount, "Servers whose last conversation search answered (1) or failed (0).",
		query(fmt.Sprintf("max by (instance, server) (otelcol_openhands_server_up{%s})", server), "{{server}} {{instance}}")))
	b.add(8, 8, chart("Conversations attached", unitCount, "Conversations with an attached socket.",
		query(fmt.Sprintf("sum by (instance) (otelcol_openhands_conversations_attached{%s})", sel), "{{instance}}")))
	b.add(8, 8, chart("Conversations waiting for a socket", unitCount, "Listed conversations beyond max_conversations, per server.",
		query(fmt.Sprintf("max by (instance, server) (otelcol_openhands_conversations_overflow{%s})", server), "{{server}} {{instance}}")))
	b.add(8, 8, chart("Socket re-attaches and stalls", unitRate, "Re-attach attempts after a drop, and sockets dropped because they stalled, by cause.",
		query(rate(fmt.Sprintf("otelcol_openhands_reconnects{%s}", sel), "instance"), "re-attach {{instance}}"),
		query(rate(fmt.Sprintf("otelcol_openhands_socket_stalls{%s}", sel), "instance, cause"), "stall {{cause}} {{instance}}")))
	b.add(8, 8, chart("Agent-server events in, AEP events out", unitRate, "Events received from the agent servers, and AEP events emitted.",
		query(rate(fmt.Sprintf("otelcol_openhands_vendor_events{%s}", sel), "instance"), "received {{instance}}"),
		query(rate(fmt.Sprintf("otelcol_openhands_aep_events{%s}", sel), "instance"), "emitted {{instance}}")))
	b.add(8, 8, chart("Webhook requests", unitRate, `POSTs to the webhook sink by server ("" when no server's key matched) and outcome.`,
		query(rate(fmt.Sprintf("otelcol_openhands_webhook_requests{%s}", server), "server, outcome"), "{{server}} {{outcome}}")))
	b.add(8, 8, chart("Log records accepted and refused by receivers", unitRate, "The collector's receiver metrics, every receiver.",
		query(rate(fmt.Sprintf("otelcol_receiver_accepted_log_records{%s}", sel), "receiver"), "accepted {{receiver}}"),
		query(rate(fmt.Sprintf("otelcol_receiver_refused_log_records{%s}", sel), "receiver"), "refused {{receiver}}")))
	b.add(8, 8, chart("Discovered agent servers by state", unitCount,
		"Servers the targets sources list: watched, draining (no longer listed, sessions still open) or waiting (for max_targets or attach_rate).",
		query(fmt.Sprintf("sum by (instance, state) (otelcol_openhands_targets{%s})", sel), "{{state}} {{instance}}")))
	b.add(8, 8, chart("Discovery refreshes by source and outcome", unitRate,
		"Refreshes of each targets source: ok, or failed (the source's last good set stands).",
		query(rate(fmt.Sprintf("otelcol_openhands_target_refreshes{%s}", sel), "source, outcome"), "{{source}} {{outcome}}")))

	b.row("AEP relay (aeprelay exporter)")
	b.add(8, 8, chart("Events confirmed and refused", unitRate, "Events the relay accepted, and events dropped as unsendable by reason.",
		query(rate(fmt.Sprintf("otelcol_aeprelay_events_sent{%s}", sel), "transport"), "confirmed {{transport}}"),
		query(rate(fmt.Sprintf("otelcol_aeprelay_events_rejected{%s}", sel), "reason"), "refused {{reason}}")))
	b.add(8, 8, chart("Link redials and auth refusals", unitRate, "WebSocket redials (a link going down), and dials or POSTs refused for their credentials.",
		query(rate(fmt.Sprintf("otelcol_aeprelay_reconnects{%s}", sel), "instance"), "redial {{instance}}"),
		query(rate(fmt.Sprintf("otelcol_aeprelay_auth_refused{%s}", sel), "transport, status_code"), "auth refused {{status_code}} {{transport}}")))
	b.add(8, 8, quantiles("Confirmation latency", "From writing a batch to the relay's confirmation.",
		fmt.Sprintf("otelcol_aeprelay_confirm_latency_bucket{%s}", sel), ", transport", "{{transport}}"))
	b.add(8, 8, chart("Exporter queues", unitCount, "Batches waiting in each exporter's queue, against its capacity.",
		query(fmt.Sprintf("max by (exporter) (otelcol_exporter_queue_size{%s})", sel), "size {{exporter}}"),
		query(fmt.Sprintf("max by (exporter) (otelcol_exporter_queue_capacity{%s})", sel), "capacity {{exporter}}")))
	b.add(8, 8, chart("Log records sent and failed by exporters", unitRate, "The collector's exporter metrics: failed means dropped after retries.",
		query(rate(fmt.Sprintf("otelcol_exporter_sent_log_records{%s}", sel), "exporter"), "sent {{exporter}}"),
		query(rate(fmt.Sprintf("otelcol_exporter_send_failed_log_records{%s}", sel), "exporter"), "failed {{exporter}}")))
	b.add(8, 8, chart("Links to the relay", unitCount, "WebSocket links open to the relay: one per agent whose events this collector sends.",
		query(fmt.Sprintf("sum by (instance) (otelcol_aeprelay_links{%s})", sel), "{{instance}}")))

	b.row("Session logs (aepfile exporter)")
	b.add(12, 8, chart("Events written and write errors", unitRate, "Events appended to the session logs, and failed file operations.",
		query(rate(fmt.Sprintf("otelcol_aepfile_events_written{%s}", sel), "instance"), "written {{instance}}"),
		query(rate(fmt.Sprintf("otelcol_aepfile_write_errors{%s}", sel), "instance"), "errors {{instance}}")))
	b.add(12, 8, chart("Open session logs", unitCount, "Session logs held open.",
		query(fmt.Sprintf("sum by (instance) (otelcol_aepfile_open_files{%s})", sel), "{{instance}}")))

	b.row("Control gate (openhandscontrol)")
	b.add(12, 8, chart("Commands by type and outcome", unitRate, "Commands handed to the gate: accepted, a refusal reason, or a duplicate.",
		query(rate(fmt.Sprintf("otelcol_openhandscontrol_commands{%s}", sel), "type, outcome"), "{{type}} {{outcome}}")))
	b.add(12, 8, chart("Acks by decision", unitRate, "Acks emitted, by decision and reason.",
		query(rate(fmt.Sprintf("otelcol_openhandscontrol_acks{%s}", sel), "decision, reason"), "{{decision}} {{reason}}")))

	b.row("Data paths (commands and AEP refused)")
	b.add(24, 8, chart("Commands and AEP refused on a data path", unitCount,
		"Totals since the collector started. Command records the aeprelay exporter refused to send, and records that already were AEP removed by aepinbound from its OTLP input: someone pushing AEP, or commands, through a data door. Any step is worth a look (alerts "+RelayCommandRefused+", "+InboundAEPRefused+").",
		query(fmt.Sprintf("sum by (instance, transport) (otelcol_aeprelay_commands_refused{%s})", sel), "commands refused {{transport}} {{instance}}"),
		query(fmt.Sprintf("sum by (instance) (otelcol_aepinbound_aep_refused{%s})", sel), "AEP refused at aepinbound {{instance}}")))

	b.row("Process")
	b.add(12, 8, chart("CPU", unitCount, "CPU seconds used per second (cores).",
		query(rate(fmt.Sprintf("otelcol_process_cpu_seconds{%s}", sel), "instance"), "{{instance}}")))
	b.add(12, 8, chart("Memory", unitBytes, "Resident set size and Go heap in use.",
		query(fmt.Sprintf("max by (instance) (otelcol_process_memory_rss{%s})", sel), "rss {{instance}}"),
		query(fmt.Sprintf("max by (instance) (otelcol_process_runtime_heap_alloc_bytes{%s})", sel), "heap {{instance}}")))

	return dashboard("otelcol-openhands-collector", "otelcol-openhands / Collector",
		"How the collectors fare: agent servers, discovery and conversations, the AEP relay and its links, session logs, the control gate, commands and AEP refused on data paths, the process (the collector's own telemetry).",
		[]Variable{
			datasourceVariable("datasource", "Metrics", "prometheus"),
			labelVariable("instance", "Collector", "otelcol_process_uptime", "instance"),
			labelVariable("server", "Agent server", "otelcol_openhands_server_up", "server"),
		}, b.numbered())
}
