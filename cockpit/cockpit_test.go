package cockpit

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestCommittedBundleIsGenerated: the committed dashboards and rules are
// exactly what the code generates (run `make cockpit` after a change),
// and nothing else sits beside them.
func TestCommittedBundleIsGenerated(t *testing.T) {
	files, err := Files(DefaultParams())
	require.NoError(t, err)
	for path, want := range files {
		got, err := os.ReadFile(path)
		require.NoError(t, err, "run `make cockpit`")
		if line, differs := firstDifference(string(want), string(got)); differs {
			t.Errorf("%s differs from what the code generates (run `make cockpit`), first at line %d", path, line)
		}
	}
	for _, dir := range []string{"dashboards", "rules"} {
		require.NoError(t, fs.WalkDir(os.DirFS("."), dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				assert.Contains(t, files, path, "%s is not generated: remove it or generate it", path)
			}
			return err
		}))
	}
}

// firstDifference is the first line (from 1) where a and b differ.
func firstDifference(a, b string) (int, bool) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		if i >= len(al) || i >= len(bl) || al[i] != bl[i] {
			return i + 1, true
		}
	}
	return 0, false
}

// TestQueriesParse: every expression of the bundle parses with
// Prometheus' own PromQL parser.
func TestQueriesParse(t *testing.T) {
	queries, err := Queries(DefaultParams())
	require.NoError(t, err)
	require.NotEmpty(t, queries)
	p := parser.NewParser(parser.Options{})
	for _, q := range queries {
		_, err := p.ParseExpr(q.Expr)
		assert.NoError(t, err, "%s: %s", q.Where, q.Expr)
	}
}

// TestEveryAlertHasARunbook: each alert's runbook anchor is a section of
// README.md, and it has the annotations and labels an operator's routing
// reads.
func TestEveryAlertHasARunbook(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	p := DefaultParams()
	for _, r := range Alerts(p).Rules {
		assert.Contains(t, string(readme), "\n### "+r.Alert+"\n", "README.md has no section for %s", r.Alert)
		assert.Equal(t, p.RunbookURL+"#"+strings.ToLower(r.Alert), r.Annotations["runbook_url"])
		assert.NotEmpty(t, r.Annotations["summary"], r.Alert)
		assert.NotEmpty(t, r.For, r.Alert)
		assert.Contains(t, []string{severityWarning, severityCritical}, r.Labels["severity"], r.Alert)
	}
}

// promtool is Prometheus' own rule checker, installed by `make tools`.
func promtool(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PROMTOOL")
	if bin == "" {
		bin = filepath.Join("..", ".tools", "promtool")
	}
	bin, err := filepath.Abs(bin)
	require.NoError(t, err)
	_, err = os.Stat(bin)
	require.NoError(t, err, "promtool missing: `make tools` installs it into .tools (PROMTOOL overrides the path)")
	return bin
}

func TestPromtoolCheckRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", RulesPath).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// series is one input series of a promtool rule test.
type series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// alertCase is one alert's unit test: over these series, at evalTime,
// the alert fires with these labels (besides its severity) and summary,
// or (labels nil) does not fire.
type alertCase struct {
	alert    string
	name     string
	input    []series
	evalTime string
	labels   map[string]string
	summary  string
}

const agentLabels = `gen_ai_agent_name="openhands", instance="c1"`

var agentFiring = map[string]string{"gen_ai_agent_name": "openhands", "instance": "c1"}

func labelsWith(base map[string]string, more ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(more); i += 2 {
		out[more[i]] = more[i+1]
	}
	return out
}

func events(typ, values string) series {
	return series{Series: `aep_events_total{aep_type="` + typ + `", ` + agentLabels + `}`, Values: values}
}

func collectorSeries(metric, labels, values string) series {
	if labels != "" {
		labels += ", "
	}
	return series{Series: metric + `{` + labels + `instance="c1"}`, Values: values}
}

var collectorFiring = map[string]string{"instance": "c1"}

// alertCases fire, and stay quiet, each alert at the default parameters.
var alertCases = []alertCase{
	{alert: AgentWaitingOnPerson, name: "a request left open", evalTime: "20m",
		input:  []series{events("attention.requested", "1x30")},
		labels: agentFiring, summary: "1 request(s) of agent openhands (collector c1) waiting on a person for more than 15m"},
	{alert: AgentWaitingOnPerson, name: "a request answered", evalTime: "20m",
		input: []series{events("attention.requested", "1x30"), events("attention.resolved", "0 0 0 1x27")}},
	{alert: AgentSpendFastBurn, name: "spending 1440 a day", evalTime: "100m",
		input:   []series{{Series: `aep_run_cost_total{aep_cost_currency="USD", ` + agentLabels + `}`, Values: "0+1x120"}},
		labels:  labelsWith(agentFiring, "aep_cost_currency", "USD"),
		summary: "agent openhands (collector c1) is spending 1.44k USD a day at the rate of the last hour, more than 4 times its daily budget of 100"},
	{alert: AgentSpendFastBurn, name: "spending 144 a day", evalTime: "100m",
		input: []series{{Series: `aep_run_cost_total{aep_cost_currency="USD", ` + agentLabels + `}`, Values: "0+0.1x120"}}},
	{alert: AgentSpendSlowBurn, name: "spending 144 a day", evalTime: "400m",
		input:   []series{{Series: `aep_run_cost_total{aep_cost_currency="USD", ` + agentLabels + `}`, Values: "0+0.1x480"}},
		labels:  labelsWith(agentFiring, "aep_cost_currency", "USD"),
		summary: "agent openhands (collector c1) is spending 144 USD a day at the rate of the last 6 hours, more than 1 times its daily budget of 100"},
	{alert: AgentSpendSlowBurn, name: "spending 72 a day", evalTime: "400m",
		input: []series{{Series: `aep_run_cost_total{aep_cost_currency="USD", ` + agentLabels + `}`, Values: "0+0.05x480"}}},
	{alert: ToolFailureRatioHigh, name: "half the calls fail", evalTime: "40m",
		input:  []series{events("tool.failed", "0+1x60"), events("tool.completed", "0+1x60")},
		labels: agentFiring, summary: "50% of the tool calls of agent openhands (collector c1) failed over the last 30m"},
	{alert: ToolFailureRatioHigh, name: "a tenth of the calls fail", evalTime: "40m",
		input: []series{events("tool.failed", "0+1x60"), events("tool.completed", "0+9x60")}},
	{alert: ToolFailureRatioHigh, name: "too few calls to judge", evalTime: "40m",
		input: []series{events("tool.failed", "0+0.1x60"), events("tool.completed", "0+0.1x60")}},
	{alert: RunFailureRatioHigh, name: "half the runs fail", evalTime: "40m",
		input:  []series{events("run.failed", "0+1x60"), events("run.finished", "0+1x60")},
		labels: agentFiring, summary: "50% of the runs of agent openhands (collector c1) failed over the last 30m"},
	{alert: RunFailureRatioHigh, name: "a tenth of the runs fail", evalTime: "40m",
		input: []series{events("run.failed", "0+1x60"), events("run.cancelled", "0+9x60")}},
	{alert: ServerUnreachable, name: "search failing", evalTime: "10m",
		input:  []series{collectorSeries("otelcol_openhands_server_up", `server="s1"`, "1 1 0x20")},
		labels: labelsWith(collectorFiring, "server", "s1"), summary: "Agent server s1 does not answer the conversation search of collector c1"},
	{alert: ServerUnreachable, name: "search answering", evalTime: "10m",
		input: []series{collectorSeries("otelcol_openhands_server_up", `server="s1"`, "0 0 1x20")}},
	{alert: ConversationsWaiting, name: "three waiting", evalTime: "10m",
		input:  []series{collectorSeries("otelcol_openhands_conversations_overflow", `server="s1"`, "3x20")},
		labels: labelsWith(collectorFiring, "server", "s1"), summary: "3 conversation(s) of agent server s1 wait for a socket on collector c1"},
	{alert: ConversationsWaiting, name: "none waiting", evalTime: "10m",
		input: []series{collectorSeries("otelcol_openhands_conversations_overflow", `server="s1"`, "0x20")}},
	{alert: SocketsStalling, name: "a stall a minute", evalTime: "70m",
		input:  []series{collectorSeries("otelcol_openhands_socket_stalls", `cause="keepalive"`, "0+1x90")},
		labels: labelsWith(collectorFiring, "cause", "keepalive"), summary: "Conversation sockets of collector c1 stalled 60 times in an hour (cause keepalive)"},
	{alert: SocketsStalling, name: "three stalls long ago", evalTime: "70m",
		input: []series{collectorSeries("otelcol_openhands_socket_stalls", `cause="keepalive"`, "0 1 2 3x87")}},
	{alert: WebhookUnauthorized, name: "a refused POST a minute", evalTime: "20m",
		input:  []series{collectorSeries("otelcol_openhands_webhook_requests", `server="s1", outcome="unauthorized"`, "0+1x30")},
		labels: labelsWith(collectorFiring, "server", "s1"), summary: `10 POSTs to the webhook sink of collector c1 failed authentication (server "s1")`},
	{alert: WebhookUnauthorized, name: "accepted POSTs", evalTime: "20m",
		input: []series{collectorSeries("otelcol_openhands_webhook_requests", `server="s1", outcome="accepted"`, "0+1x30")}},
	{alert: RelayLinkDown, name: "a redial a minute", evalTime: "20m",
		input:  []series{collectorSeries("otelcol_aeprelay_reconnects", "", "0+1x30")},
		labels: collectorFiring, summary: "The AEP relay link of collector c1 redialled 10 times in 10m"},
	{alert: RelayLinkDown, name: "two redials", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aeprelay_reconnects", "", "0x15 1 2x15")}},
	{alert: RelayBacklogGrowing, name: "queue 80% full", evalTime: "10m",
		input: []series{
			collectorSeries("otelcol_exporter_queue_size", `exporter="aeprelay", data_type="logs"`, "800x20"),
			collectorSeries("otelcol_exporter_queue_capacity", `exporter="aeprelay", data_type="logs"`, "1000x20"),
		},
		labels: labelsWith(collectorFiring, "exporter", "aeprelay"), summary: "The queue of aeprelay on collector c1 is 80% full"},
	{alert: RelayBacklogGrowing, name: "another exporter's queue full", evalTime: "10m",
		input: []series{
			collectorSeries("otelcol_exporter_queue_size", `exporter="aeprelay", data_type="logs"`, "10x20"),
			collectorSeries("otelcol_exporter_queue_capacity", `exporter="aeprelay", data_type="logs"`, "1000x20"),
			collectorSeries("otelcol_exporter_queue_size", `exporter="otlp", data_type="logs"`, "1000x20"),
			collectorSeries("otelcol_exporter_queue_capacity", `exporter="otlp", data_type="logs"`, "1000x20"),
		}},
	{alert: RelayRefusingEvents, name: "the relay refuses events", evalTime: "20m",
		input:  []series{collectorSeries("otelcol_aeprelay_events_rejected", `reason="relay_refused", code="invalid-event"`, "0+1x30")},
		labels: labelsWith(collectorFiring, "code", "invalid-event"), summary: "The AEP relay refused 10 events of collector c1 (code invalid-event)"},
	{alert: RelayRefusingEvents, name: "events invalid before sending", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aeprelay_events_rejected", `reason="invalid"`, "0+1x30")}},
	{alert: RelayAuthRefused, name: "dials refused", evalTime: "20m",
		input:   []series{collectorSeries("otelcol_aeprelay_auth_refused", `transport="websocket", status_code="401"`, "0+1x30")},
		labels:  labelsWith(collectorFiring, "transport", "websocket", "status_code", "401"),
		summary: "The AEP relay refused the credentials of collector c1 (401 over websocket)"},
	{alert: RelayAuthRefused, name: "refusals long ago", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aeprelay_auth_refused", `transport="websocket", status_code="401"`, "5x30")}},
	{alert: ControlRefusingCommands, name: "approvals refused", evalTime: "20m",
		input:   []series{collectorSeries("otelcol_openhandscontrol_commands", `type="approve", outcome="refused"`, "0+1x30")},
		labels:  labelsWith(collectorFiring, "type", "approve", "outcome", "refused"),
		summary: "The control gate of collector c1 refused 10 approve command(s): refused"},
	{alert: ControlRefusingCommands, name: "approvals accepted", evalTime: "20m",
		input: []series{collectorSeries("otelcol_openhandscontrol_commands", `type="approve", outcome="accepted"`, "0+1x30")}},
	{alert: ControlSessionConflict, name: "conflicts", evalTime: "20m",
		input:  []series{collectorSeries("otelcol_openhandscontrol_session_conflicts", "", "0+1x30")},
		labels: collectorFiring, summary: "The control gate of collector c1 refused 10 command(s): more than one conversation claims their session"},
	{alert: ControlSessionConflict, name: "conflicts long ago", evalTime: "20m",
		input: []series{collectorSeries("otelcol_openhandscontrol_session_conflicts", "", "2x30")}},
	{alert: ReceiverRefusingData, name: "records refused", evalTime: "20m",
		input:   []series{collectorSeries("otelcol_receiver_refused_log_records", `receiver="openhands", transport="http"`, "0+1x30")},
		labels:  labelsWith(collectorFiring, "receiver", "openhands", "transport", "http"),
		summary: "Receiver openhands of collector c1 refused 10 log records"},
	{alert: ReceiverRefusingData, name: "none refused", evalTime: "20m",
		input: []series{collectorSeries("otelcol_receiver_refused_log_records", `receiver="openhands", transport="http"`, "0x30")}},
	{alert: ExporterSendFailing, name: "records dropped", evalTime: "20m",
		input:  []series{collectorSeries("otelcol_exporter_send_failed_log_records", `exporter="aeprelay"`, "0+1x30")},
		labels: labelsWith(collectorFiring, "exporter", "aeprelay"), summary: "Exporter aeprelay of collector c1 dropped 10 log records it could not send"},
	{alert: ExporterSendFailing, name: "none dropped", evalTime: "20m",
		input: []series{collectorSeries("otelcol_exporter_send_failed_log_records", `exporter="aeprelay"`, "0x30")}},
	{alert: SessionLogWriteErrors, name: "writes failing", evalTime: "20m",
		input:  []series{collectorSeries("otelcol_aepfile_write_errors", "", "0+1x30")},
		labels: collectorFiring, summary: "The aepfile exporter of collector c1 failed 10 file operations on the session logs"},
	{alert: SessionLogWriteErrors, name: "no failure", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aepfile_write_errors", "", "0x30")}},
	{alert: ConnectorSeriesDropped, name: "points dropped", evalTime: "20m",
		input:  []series{collectorSeries("otelcol_aep_connector_series_dropped", "", "0+1x30")},
		labels: collectorFiring, summary: "The aep connector of collector c1 dropped 10 metric points at max_series"},
	{alert: ConnectorSeriesDropped, name: "none dropped", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aep_connector_series_dropped", "", "0x30")}},
	{alert: PolicyHardBreach, name: "the first hard breach (a new series)", evalTime: "10m",
		input:   []series{collectorSeries("otelcol_aeppolicy_breaches", `agent="openhands", policy="budget.session.cost", level="hard"`, "_x5 1x25")},
		labels:  labelsWith(collectorFiring, "agent", "openhands", "policy", "budget.session.cost"),
		summary: "Agent openhands breached policy budget.session.cost (hard) 1 time(s) in 10m on collector c1; the guardrail event in its session names the session"},
	{alert: PolicyHardBreach, name: "soft breaches only", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aeppolicy_breaches", `agent="openhands", policy="budget.session.cost", level="soft"`, "_x5 1+1x25")}},
	{alert: PolicyHardBreach, name: "a hard breach long ago", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aeppolicy_breaches", `agent="openhands", policy="loop.tool", level="hard"`, "1x30")}},
	{alert: PolicySoftBreach, name: "soft breaches growing", evalTime: "20m",
		input:   []series{collectorSeries("otelcol_aeppolicy_breaches", `agent="codex", policy="stuck.idle", level="soft"`, "1+1x30")},
		labels:  labelsWith(collectorFiring, "agent", "codex", "policy", "stuck.idle"),
		summary: "Agent codex breached policy stuck.idle (soft) 10 time(s) in 10m on collector c1; the guardrail event in its session names the session"},
	{alert: PolicySoftBreach, name: "a hard breach", evalTime: "10m",
		input: []series{collectorSeries("otelcol_aeppolicy_breaches", `agent="codex", policy="loop.tool", level="hard"`, "_x5 1x25")}},
	{alert: RelayCommandRefused, name: "the first command refused (a new series)", evalTime: "10m",
		input:   []series{collectorSeries("otelcol_aeprelay_commands_refused", `transport="websocket"`, "_x5 1x25")},
		labels:  labelsWith(collectorFiring, "transport", "websocket"),
		summary: "The aeprelay exporter of collector c1 refused to send 1 control command(s) over websocket: a receiver of its pipeline took commands from outside"},
	{alert: RelayCommandRefused, name: "commands refused long ago", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aeprelay_commands_refused", `transport="websocket"`, "3x30")}},
	{alert: InboundAEPRefused, name: "AEP records keep arriving", evalTime: "20m",
		input:   []series{collectorSeries("otelcol_aepinbound_aep_refused", "", "0+1x30")},
		labels:  collectorFiring,
		summary: "The aepinbound processor of collector c1 removed 10 record(s) that already were AEP from its OTLP input"},
	{alert: InboundAEPRefused, name: "AEP records long ago", evalTime: "20m",
		input: []series{collectorSeries("otelcol_aepinbound_aep_refused", "", "2x30")}},
	{alert: DiscoverySourceFailing, name: "every refresh fails", evalTime: "20m",
		input: []series{
			collectorSeries("otelcol_openhands_target_refreshes", `source="targets.file_sd[1]", outcome="failed"`, "0+2x30"),
			collectorSeries("otelcol_openhands_target_refreshes", `source="targets.file_sd[0]", outcome="ok"`, "0+2x30"),
		},
		labels: labelsWith(collectorFiring, "source", "targets.file_sd[1]"), summary: "Discovery source targets.file_sd[1] of collector c1 failed every refresh for 10m"},
	{alert: DiscoverySourceFailing, name: "a refresh failed between good ones", evalTime: "20m",
		input: []series{
			collectorSeries("otelcol_openhands_target_refreshes", `source="targets.file_sd[0]", outcome="failed"`, "0x10 1x20"),
			collectorSeries("otelcol_openhands_target_refreshes", `source="targets.file_sd[0]", outcome="ok"`, "0+2x30"),
		}},
}

type promtoolTests struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval string          `yaml:"evaluation_interval"`
	Tests              []promtoolGroup `yaml:"tests"`
}

type promtoolGroup struct {
	Name          string          `yaml:"name"`
	Interval      string          `yaml:"interval"`
	InputSeries   []series        `yaml:"input_series"`
	AlertRuleTest []alertRuleTest `yaml:"alert_rule_test"`
}

type alertRuleTest struct {
	EvalTime  string     `yaml:"eval_time"`
	Alertname string     `yaml:"alertname"`
	ExpAlerts []expAlert `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

// TestPromtoolTestRules runs `promtool test rules` over alertCases: each
// alert fires where it should, with its summary naming what it is about,
// and stays quiet where it should not.
func TestPromtoolTestRules(t *testing.T) {
	bin := promtool(t)
	p := DefaultParams()
	rules := map[string]Rule{}
	for _, r := range Alerts(p).Rules {
		rules[r.Alert] = r
	}
	rulesPath, err := filepath.Abs(RulesPath)
	require.NoError(t, err)
	tests := promtoolTests{RuleFiles: []string{rulesPath}, EvaluationInterval: p.EvaluationInterval}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, c := range alertCases {
		rule, ok := rules[c.alert]
		require.True(t, ok, "no alert %s", c.alert)
		test := alertRuleTest{EvalTime: c.evalTime, Alertname: c.alert}
		if c.labels != nil {
			fires[c.alert] = true
			test.ExpAlerts = []expAlert{{
				ExpLabels: labelsWith(c.labels, "severity", rule.Labels["severity"]),
				ExpAnnotations: map[string]string{
					"summary": c.summary, "description": rule.Annotations["description"], "runbook_url": rule.Annotations["runbook_url"],
				},
			}}
		} else {
			quiet[c.alert] = true
		}
		tests.Tests = append(tests.Tests, promtoolGroup{Name: c.alert + ": " + c.name, Interval: "1m", InputSeries: c.input, AlertRuleTest: []alertRuleTest{test}})
	}
	for name := range rules {
		assert.True(t, fires[name], "no case makes %s fire", name)
		assert.True(t, quiet[name], "no case keeps %s quiet", name)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	require.NoError(t, enc.Encode(tests))
	path := filepath.Join(t.TempDir(), "alerts_test.yaml")
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
	res, err := exec.Command(bin, "test", "rules", path).CombinedOutput()
	require.NoError(t, err, "%s", res)
}

// TestDashboardsFollowGrafanasSchema: each dashboard decodes strictly
// (no unknown field, no wrong type, every required field) into the
// dashboard model of Grafana's foundation SDK, generated from Grafana's
// own schemas, with every panel plugin's options and queries.
func TestDashboardsFollowGrafanasSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	files, err := Files(DefaultParams())
	require.NoError(t, err)
	for _, path := range []string{AgentsDashboardPath, CollectorDashboardPath} {
		//lint:ignore SA1019 the cockpit writes the classic dashboard JSON that file provisioning and the import take, which this model describes; dashboardv2 is another format
		var d grafana.Dashboard
		err := d.UnmarshalJSONStrict(files[path])
		// The SDK returns its error list typed even when it is empty.
		var errs cog.BuildErrors
		if errors.As(err, &errs) && len(errs) == 0 {
			err = nil
		}
		assert.NoError(t, err, path)
	}
}
