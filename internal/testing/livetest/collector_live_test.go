//go:build live

package livetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrysink"
)

// collectorConfig renders one collector: a receiver, a relay exporter and a
// pipeline per capture level, all pipelines also into one OTLP sink.
func collectorConfig(mode string, fronts, relays map[aep.Capture]string, sink string) string {
	var rcv, exp, pipes strings.Builder
	for _, level := range Levels {
		fmt.Fprintf(&rcv, "  openhands/%s:\n%s", level, Indent(ReceiverYAML(mode, level, fronts[level]), 4))
		fmt.Fprintf(&exp, "  aeprelay/%s:\n    endpoint: %s\n    token: %s\n    instance: live/%s\n",
			level, relays[level], relayToken, Label(mode, level))
		fmt.Fprintf(&pipes, "    logs/%s:\n      receivers: [openhands/%s]\n      processors: [batch]\n      exporters: [aeprelay/%s, otlp_http]\n",
			level, level, level)
	}
	return fmt.Sprintf(`receivers:
%sprocessors:
  batch:
    timeout: 50ms
exporters:
%s  otlp_http:
    endpoint: %s
    compression: none
%s%s`, rcv.String(), exp.String(), sink, quietPipelines, pipes.String())
}

// quietPipelines opens a live collector's service section: no internal
// metrics (their port would clash between collectors), then its pipelines.
const quietPipelines = `service:
  telemetry:
    metrics:
      level: none
  pipelines:
`

// receiverCollectorConfig renders a collector of one openhands receiver
// (its configuration, unindented) into a relay and an OTLP sink.
func receiverCollectorConfig(receiver, relay, instance, sink string) string {
	return fmt.Sprintf(`receivers:
  openhands:
%sexporters:
  aeprelay:
    endpoint: %s
    token: %s
    instance: live/%s
  otlp_http:
    endpoint: %s
    compression: none
%s    logs:
      receivers: [openhands]
      exporters: [aeprelay, otlp_http]
`, Indent(receiver, 4), relay, relayToken, instance, sink, quietPipelines)
}

// webhookReceiverYAML is r's ReceiverYAML polling once an hour, with its
// webhook sink on sinkAddr (webhook.only for hookOnly).
func webhookReceiverYAML(r *receiverUnderTest, sinkAddr string) string {
	hook := "poll_interval: 1h\nwebhook:\n  endpoint: " + sinkAddr
	if r.hook == hookOnly {
		hook += "\n  only: true"
	}
	return strings.Replace(ReceiverYAML(r.mode, r.level, r.front.ProxyURL()), "poll_interval: 200ms", hook, 1)
}

const relayToken = "live-relay-token"

// collectorProcess is the built distribution, a child process.
type collectorProcess struct {
	*childproc.Process
	log string
}

func startCollectorProcess(tb testing.TB, bin, config string) *collectorProcess {
	tb.Helper()
	dir := tb.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	logPath := filepath.Join(dir, "collector.log")
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = logf, logf
	proc, err := childproc.Start(cmd, childproc.InGroup())
	logf.Close() // the collector has its own descriptor
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// A graceful shutdown, killed after 20 s.
		if proc.Stop(20 * time.Second) {
			tb.Errorf("collector ignored SIGTERM for 20s; killed it")
		}
	})
	return &collectorProcess{Process: proc, log: logPath}
}

func (p *collectorProcess) logText() string {
	raw, _ := os.ReadFile(p.log)
	return string(raw)
}

// logOnFailure prints the tails of the collectors' and the agent server's
// logs when the test has failed.
func logOnFailure(t *testing.T, server *agentServer, cols ...*collectorProcess) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range cols {
				t.Logf("collector log:\n%s", tail(c.logText(), 6000))
			}
			t.Logf("agent server log:\n%s", server.logTail())
		}
	})
}

// startRecordedFront puts a Recorder of the agent server at upstream behind
// its own Front, both closed when the test ends.
func startRecordedFront(tb testing.TB, upstream string) (*Recorder, *Front) {
	rec, err := NewRecorder(upstream)
	require.NoError(tb, err)
	tb.Cleanup(rec.Close)
	front, err := StartFront(rec)
	require.NoError(tb, err)
	tb.Cleanup(front.Close)
	return rec, front
}

// otlpSink keeps the AEP events of every OTLP/HTTP logs export, by the
// openhands.server.name of their resource (the receiver's label).
type otlpSink struct {
	*telemetrysink.Logs

	mu       sync.Mutex
	byServer map[string][]*aep.Event
	errs     []string // records that are no AEP event
}

func startOTLPSink(tb testing.TB) *otlpSink {
	s := &otlpSink{byServer: map[string][]*aep.Event{}}
	var err error
	if s.Logs, err = telemetrysink.StartLogs(s.consume); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *otlpSink) consume(ld plog.Logs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rl := range ld.ResourceLogs().All() {
		name, _ := rl.Resource().Attributes().Get("openhands.server.name")
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				ev, err := projection.FromLogRecord(lr, rl.Resource())
				if err != nil {
					s.errs = append(s.errs, err.Error())
					continue
				}
				s.byServer[name.Str()] = append(s.byServer[name.Str()], ev)
			}
		}
	}
}

func (s *otlpSink) events(label string) []*aep.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*aep.Event(nil), s.byServer[label]...)
}

// errors are the refused exports and the records that are no AEP event.
func (s *otlpSink) errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(s.Refused(), s.errs...)
}
