package cockpitcheck

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/cockpit"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

const (
	sessionKey = "cockpit-session-key"
	relayToken = "cockpit-relay-token"
	// waitLimit bounds every wait: a demo scenario, an alert, a stall
	// (the receiver's keepalive notices a silent socket within 45s).
	waitLimit = 3 * time.Minute
	root      = "../../.."
)

// tool is a binary the Makefile provides: env names its path, else the
// default under the repository.
func tool(t *testing.T, env, path, make string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		bin = filepath.Join(root, path)
	}
	bin, err := filepath.Abs(bin)
	require.NoError(t, err)
	_, err = os.Stat(bin)
	require.NoError(t, err, "%s missing: %s (%s overrides the path)", bin, make, env)
	return bin
}

// exposed is what the distribution exposed: the label names seen on each
// metric, over every scrape.
type exposed map[string]map[string]bool

// scrapeLabels are the labels Prometheus adds to every scraped series.
var scrapeLabels = map[string]bool{"instance": true, "job": true}

var promql = parser.NewParser(parser.Options{})

// scrape reads one Prometheus text exposition into e.
func (e exposed) scrape(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 4<<20)
	for lines.Scan() {
		line := lines.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series := line[:strings.LastIndexAny(line, " ")]
		if i := strings.LastIndex(series, "}"); i >= 0 {
			series = series[:i+1]
		}
		ls, err := promql.ParseMetric(series)
		if err != nil {
			return fmt.Errorf("scrape %s: %q: %w", url, line, err)
		}
		name := ls.Get("__name__")
		if e[name] == nil {
			e[name] = map[string]bool{}
		}
		ls.Range(func(l labels.Label) { e[name][l.Name] = true })
	}
	return lines.Err()
}

// TestCockpitAgainstTheDistribution runs the demo scenarios and the fault
// scenario through the built collector, with a real Prometheus server
// evaluating the cockpit's rules on the fault scenario, then checks every
// query of the cockpit against what was exposed.
func TestCockpitAgainstTheDistribution(t *testing.T) {
	collector := tool(t, "OTELCOL_OPENHANDS_BIN", "bin/otelcol-openhands", "run `make build`")
	prometheus := tool(t, "PROMETHEUS", ".tools/prometheus", "`make tools` installs it")
	demo := filepath.Join(t.TempDir(), "demo")
	build := exec.Command("go", "build", "-o", demo, "./internal/testing/demo")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the demo: %s", out)

	seen := exposed{}
	for _, s := range []struct{ scenario, config string }{
		{"watch", "testdata/demo-config.yaml"},
		{"control", "testdata/demo-control-config.yaml"},
		{"fleet", "testdata/demo-fleet-config.yaml"},
		{"govern", "testdata/demo-govern-config.yaml"},
	} {
		runDemo(t, demo, collector, s.scenario, s.config, seen)
	}
	runFaults(t, collector, prometheus, seen)
	checkQueries(t, seen)
}

var holding = regexp.MustCompile(`holding the collector \(prometheus exporter at "([^"]*)"\)`)

// runDemo plays one demo scenario (make demo, demo-control, demo-fleet,
// demo-govern)
// with the collector's telemetry served, and scrapes the collector once
// the scenario is over and the demo holds it.
func runDemo(t *testing.T, demo, collector, scenario, config string, seen exposed) {
	t.Helper()
	telemetry, err := childproc.FreeAddr()
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(telemetry)
	overlay, err := filepath.Abs("testdata/overlay.yaml")
	require.NoError(t, err)
	cmd := exec.Command(demo, "-scenario", scenario, "-collector", collector, "-config", config, "-hold", "-extra-config", overlay)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "COCKPIT_TELEMETRY_PORT="+port)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	logPath := filepath.Join(t.TempDir(), "demo-"+scenario+".log")
	log, err := os.Create(logPath)
	require.NoError(t, err)
	defer log.Close()
	cmd.Stderr = log
	p, err := childproc.Start(cmd, childproc.InGroup(), childproc.DieWithParent())
	require.NoError(t, err)
	defer p.Stop(30 * time.Second)
	output := func() string {
		out, _ := os.ReadFile(logPath)
		return string(out)
	}

	// The demo's output goes to the log; its holding line names the
	// prometheus exporter.
	exporter := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			fmt.Fprintln(log, lines.Text())
			if m := holding.FindStringSubmatch(lines.Text()); m != nil {
				exporter <- m[1]
			}
		}
		close(exporter)
	}()
	select {
	case addr, ok := <-exporter:
		require.True(t, ok, "demo %s ended before holding its collector: %v\n%s", scenario, p.ExitErr(), output())
		require.NoError(t, seen.scrape("http://"+telemetry+"/metrics"), "demo %s", scenario)
		if addr != "" {
			require.NoError(t, seen.scrape("http://"+addr+"/metrics"), "demo %s", scenario)
		}
	case <-time.After(waitLimit):
		t.Fatalf("demo %s did not finish within %s:\n%s", scenario, waitLimit, output())
	}
}

// fastParams are the bundle's parameters with timings short enough for
// the fault scenario to make its alerts fire within a test.
func fastParams() cockpit.Params {
	p := cockpit.DefaultParams()
	p.EvaluationInterval, p.For, p.AttentionWait, p.ErrorWindow = "1s", "1s", "2s", "1m"
	p.RelayRedials = 2
	return p
}

// runFaults runs the collector with tests/faults-config.yaml, a real
// Prometheus server scraping it with the cockpit's rules (fastParams),
// and scripts what the operator should be told about: an approval left
// waiting (its run also breaches a hard policy), a discovery source that
// never parses, then the relay going down. Beside them it provokes what only faults expose (webhook POSTs
// with a wrong key, refused relay credentials and dropped records, events
// the relay refuses, session logs that cannot be written, a connector at
// max_series, a stalled socket, a command for a session two conversations
// claim, a discovery source that does not parse, a command pushed over
// OTLP), and scrapes everything at the end.
func runFaults(t *testing.T, collectorBin, prometheusBin string, seen exposed) {
	t.Helper()
	dir := t.TempDir()
	addrs := make([]string, 6)
	for i := range addrs {
		var err error
		addrs[i], err = childproc.FreeAddr()
		require.NoError(t, err)
	}
	telemetry, exporter, webhook, prometheus, otlp, nobody := addrs[0], addrs[1], addrs[2], addrs[3], addrs[4], addrs[5]

	relay, err := aeprelaytest.New(aeprelaytest.Config{Token: relayToken, Refuse: func(ev *aep.Event) error {
		if ev.Type == "state.delta" {
			return errors.New("the cockpit check refuses state.delta")
		}
		return nil
	}})
	require.NoError(t, err)
	t.Cleanup(relay.Close)
	agents, err := oh.NewServer(oh.Config{SessionAPIKeys: []string{sessionKey},
		Webhooks: []oh.WebhookSpec{{BaseURL: "http://" + webhook, FlushDelay: 100 * time.Millisecond}}})
	require.NoError(t, err)
	t.Cleanup(agents.Close)

	// The session logs' agent directory is a file: every write fails.
	sessionLogs := filepath.Join(dir, "sessions")
	require.NoError(t, os.MkdirAll(sessionLogs, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(sessionLogs, "openhands"), nil, 0o600))

	// Discovery: one source lists a server nobody answers on, the other's
	// file does not parse.
	targets, brokenTargets := filepath.Join(dir, "targets.json"), filepath.Join(dir, "broken-targets.json")
	require.NoError(t, os.WriteFile(targets, []byte(`[{"targets": ["`+nobody+`"]}]`), 0o600))
	require.NoError(t, os.WriteFile(brokenTargets, []byte(`[{"targets": [`), 0o600))

	_, telemetryPort, _ := net.SplitHostPort(telemetry)
	collector := start(t, dir, "collector", exec.Command(collectorBin, "--config", "testdata/faults-config.yaml"),
		"COCKPIT_AGENT_SERVER="+agents.URL(), "COCKPIT_SESSION_API_KEY="+sessionKey, "COCKPIT_WEBHOOK="+webhook,
		"COCKPIT_RELAY="+relay.URL(), "COCKPIT_RELAY_TOKEN="+relayToken, "COCKPIT_PROMETHEUS="+exporter,
		"COCKPIT_TELEMETRY_PORT="+telemetryPort, "COCKPIT_SESSION_LOGS="+sessionLogs,
		"COCKPIT_TARGETS="+targets, "COCKPIT_BROKEN_TARGETS="+brokenTargets, "COCKPIT_OTLP="+otlp)

	require.NoError(t, cockpit.Write(dir, fastParams()))
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: otelcol-openhands
    static_configs: [{targets: [%q]}]
  - job_name: otelcol-openhands-agents
    static_configs: [{targets: [%q]}]
`, filepath.Join(dir, cockpit.RulesPath), telemetry, exporter)
	configPath := filepath.Join(dir, "prometheus.yaml")
	require.NoError(t, os.WriteFile(configPath, []byte(config), 0o600))
	start(t, dir, "prometheus", exec.Command(prometheusBin, "--config.file="+configPath,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+prometheus))

	ctx, cancel := context.WithTimeout(t.Context(), 2*waitLimit)
	defer cancel()
	seenOnRelay := func(conv *oh.Conversation, typ string) {
		t.Helper()
		require.NoError(t, relay.WaitFor(ctx, func(r *aeprelaytest.Relay) bool {
			return slices.ContainsFunc(r.Events(), func(rec aeprelaytest.Record) bool {
				return rec.Event.Session == conv.ID() && rec.Event.Type == typ
			})
		}), "waiting for %s of %s on the relay; the collector's log ends:\n%s", typ, conv.ID(), tail(collector))
	}

	// An approval left waiting.
	waiting, err := agents.CreateConversation(oh.ConversationOptions{Title: "Clean the build"})
	require.NoError(t, err)
	seenOnRelay(waiting, "state.snapshot")
	_, err = waiting.SendUserMessage("Clean the build directory.", false)
	require.NoError(t, err)
	_, err = waiting.SetStatus(oh.StatusRunning)
	require.NoError(t, err)
	_, err = waiting.Append(oh.ActionEvent(oh.ActionSpec{Action: map[string]any{"kind": "TerminalAction", "command": "rm -rf build"}, SecurityRisk: "HIGH"}))
	require.NoError(t, err)
	_, err = waiting.SetStatus(oh.StatusWaitingForConfirmation)
	require.NoError(t, err)
	seenOnRelay(waiting, "attention.requested")

	// A socket that goes silent.
	stalled, err := agents.CreateConversation(oh.ConversationOptions{Title: "Behind a stuck proxy"})
	require.NoError(t, err)
	seenOnRelay(stalled, "state.snapshot")
	stalled.StallSockets()

	// Someone probing the webhook sink.
	for range 3 {
		req, err := http.NewRequest(http.MethodPost, "http://"+webhook+"/conversations", strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("X-Session-API-Key", "a-guess")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}

	// Someone pushing a command over OTLP: aepinbound removes it from its
	// pipeline, the relay exporter refuses it in the unguarded one.
	pushed := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"eventName":"dev.aep.control.pause","body":{"stringValue":"{}"}}]}]}]}`
	resp, err := http.Post("http://"+otlp+"/v1/logs", "application/json", strings.NewReader(pushed))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, waitUntil(ctx, exposes("http://"+telemetry+"/metrics", "otelcol_aeprelay_commands_refused", "otelcol_aepinbound_aep_refused")),
		"the command pushed over OTLP was not refused; the collector's log ends:\n%s", tail(collector))

	// An operator's command for a session both receivers observe: the
	// gate refuses it as a conflict.
	command, err := json.Marshal(aep.Event{
		AEP: aep.Version, ID: aep.DeterministicID(time.Now(), "cockpit-pause"), Type: "control.pause",
		Source: "aep://ops.example/agent/mission-control", Agent: "mission-control",
		Time: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Session: waiting.ID(), Capture: aep.CaptureMetadata,
	})
	require.NoError(t, err)
	refusal, err := relay.SendCommand(command)
	require.NoError(t, err)
	require.Nil(t, refusal, "the relay refused the command")

	api := "http://" + prometheus
	awaitAlert(t, ctx, api, cockpit.AgentWaitingOnPerson)
	awaitAlert(t, ctx, api, cockpit.PolicyHardBreach)
	awaitAlert(t, ctx, api, cockpit.DiscoverySourceFailing)

	// The relay goes down.
	relay.SetDown(true)
	relay.DropConnections()
	awaitAlert(t, ctx, api, cockpit.RelayLinkDown)

	require.NoError(t, waitUntil(ctx, exposes("http://"+telemetry+"/metrics", "otelcol_openhands_socket_stalls")),
		"no socket stall counted; the collector's log ends:\n%s", tail(collector))
	require.NoError(t, seen.scrape("http://"+telemetry+"/metrics"))
	require.NoError(t, seen.scrape("http://"+exporter+"/metrics"))
}

// exposes holds once one scrape of url exposes every metric named.
func exposes(url string, metrics ...string) func() bool {
	return func() bool {
		probe := exposed{}
		return probe.scrape(url) == nil && !slices.ContainsFunc(metrics, func(m string) bool { return probe[m] == nil })
	}
}

// start runs a child with its output in a log file under dir and stops it
// when the test ends; it returns the log's path (see tail).
func start(t *testing.T, dir, name string, cmd *exec.Cmd, env ...string) string {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	require.NoError(t, err)
	defer log.Close()
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := childproc.Start(cmd, childproc.DieWithParent())
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(30 * time.Second) })
	return log.Name()
}

// tail is the end of a child's log, for a failure message (the log
// itself goes with the test's temporary directory).
func tail(path string) string {
	out, _ := os.ReadFile(path)
	lines := strings.Split(string(out), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

func waitUntil(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// awaitAlert waits until the Prometheus server at api reports the alert
// firing, read back from its HTTP API.
func awaitAlert(t *testing.T, ctx context.Context, api, name string) {
	t.Helper()
	var last string
	err := waitUntil(ctx, func() bool {
		resp, err := http.Get(api + "/api/v1/alerts")
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		last = string(body)
		var alerts struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &alerts) != nil {
			return false
		}
		return slices.ContainsFunc(alerts.Data.Alerts, func(a struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		}) bool {
			return a.Labels["alertname"] == name && a.State == "firing"
		})
	})
	require.NoError(t, err, "alert %s never fired; the server's alerts: %s", name, last)
}

// checkQueries fails for every metric or label a cockpit query names that
// the distribution never exposed. A label is checked where the query
// names it: a selector's matchers against that metric, a by/on/group
// list against the metrics the expression reads (through the recording
// rules it uses).
func checkQueries(t *testing.T, seen exposed) {
	t.Helper()
	p := cockpit.DefaultParams()
	queries, err := cockpit.Queries(p)
	require.NoError(t, err)
	records := map[string]parser.Expr{}
	for _, g := range cockpit.Rules(p).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record], err = promql.ParseExpr(r.Expr)
				require.NoError(t, err, r.Record)
			}
		}
	}
	// read is the metrics an expression reads, through recording rules.
	var read func(parser.Expr) []string
	read = func(e parser.Expr) []string {
		var names []string
		parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
			if vs, ok := node.(*parser.VectorSelector); ok {
				if rec, ok := records[vs.Name]; ok {
					names = append(names, read(rec)...)
				} else {
					names = append(names, vs.Name)
				}
			}
			return nil
		})
		return names
	}
	onAny := func(metrics []string, label string) bool {
		return scrapeLabels[label] || slices.ContainsFunc(metrics, func(m string) bool { return seen[m][label] })
	}
	for _, q := range queries {
		expr, err := promql.ParseExpr(q.Expr)
		require.NoError(t, err, "%s: %s", q.Where, q.Expr)
		metrics := read(expr)
		for _, label := range q.Labels {
			if !onAny(metrics, label) {
				t.Errorf("%s: label %s never appeared on %s", q.Where, label, q.Expr)
			}
		}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			var names, on []string
			switch n := node.(type) {
			case *parser.VectorSelector:
				on = []string{n.Name}
				if _, isRecord := records[n.Name]; isRecord {
					on = read(n)
				} else if seen[n.Name] == nil {
					t.Errorf("%s: metric %s never appeared", q.Where, n.Name)
				}
				for _, m := range n.LabelMatchers {
					if m.Name != "__name__" {
						names = append(names, m.Name)
					}
				}
			case *parser.AggregateExpr:
				names, on = n.Grouping, metrics
			case *parser.BinaryExpr:
				if n.VectorMatching != nil {
					names, on = append(slices.Clone(n.VectorMatching.MatchingLabels), n.VectorMatching.Include...), metrics
				}
			}
			for _, label := range names {
				if !onAny(on, label) {
					t.Errorf("%s: label %s never appeared on %s", q.Where, label, strings.Join(on, ", "))
				}
			}
			return nil
		})
	}
}
