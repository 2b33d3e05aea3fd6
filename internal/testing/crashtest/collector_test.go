package crashtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
)

// binaryEnv overrides where the built collector is.
const binaryEnv = "OTELCOL_OPENHANDS_BIN"

// collectorBinary is the built distribution: $OTELCOL_OPENHANDS_BIN, else
// bin/otelcol-openhands at the module root. A missing binary fails the
// test (never a skip): `make test` builds it before it tests.
func collectorBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(binaryEnv)
	if bin == "" {
		bin = filepath.Join("..", "..", "..", "bin", "otelcol-openhands")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatalf("collector binary: %v", err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the built collector is missing (%v): run `make build` first, or `make test`, which builds it before testing", err)
	}
	return bin
}

// collectorConfig is the collector under test: storage on the receiver,
// no in-memory batch processor (what it holds
// would die with the process), short timings so faults heal quickly, and
// retries that never give up. socket is the receiver's servers[].socket,
// queue the aeprelay exporter's sending_queue. Beside the relay, the
// aepfile exporter writes session logs under sessionsDir, its queue on
// storage and fsync every_batch.
func collectorConfig(storageDir, agentServer, socket, relay, queue, sessionsDir string) string {
	return fmt.Sprintf(`
extensions:
  file_storage:
    directory: %s
    timeout: 2s
receivers:
  openhands:
    servers:
      - endpoint: %s
        session_api_key: %s
        socket: %s
        name: stub
    poll_interval: 100ms
    storage: file_storage
    reconnect:
      initial_interval: 10ms
      max_interval: 200ms
exporters:
  aeprelay:
    endpoint: %s
    token: %s
    instance: crashtest/1
    hello_timeout: 2s
    confirm_timeout: 2s
    timeout: 5s
    reconnect:
      initial_interval: 10ms
      max_interval: 200ms
    sending_queue:%s
    retry_on_failure:
      initial_interval: 10ms
      max_interval: 200ms
      max_elapsed_time: 0s
  aepfile:
    directory: %s
    fsync: every_batch
    sending_queue:
      storage: file_storage
      queue_size: 100000
    retry_on_failure:
      initial_interval: 10ms
      max_interval: 200ms
      max_elapsed_time: 0s
service:
  extensions: [file_storage]
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [openhands]
      exporters: [aeprelay, aepfile]
`, storageDir, agentServer, stubKey, socket, relay, relayToken, queue, sessionsDir)
}

// collectorFiles writes a collector's configuration into dir and creates
// its log file there; the log's tail is printed if the test fails.
func collectorFiles(t *testing.T, dir, config string) (configPath string, log *os.File, logPath string) {
	t.Helper()
	configPath = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath = filepath.Join(dir, "collector.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		log.Close()
		if t.Failed() {
			t.Logf("collector log (tail):\n%s", logTail(logPath, 40))
		}
	})
	return configPath, log, logPath
}

// collector is one run of the built collector as a child process; its
// log goes to a file the test prints when it fails.
type collector struct {
	*childproc.Process
}

// startCollector runs bin on configs, each merged over the ones before.
func startCollector(t *testing.T, bin string, log *os.File, configs ...string) *collector {
	t.Helper()
	var args []string
	for _, c := range configs {
		args = append(args, "--config", c)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := childproc.Start(cmd)
	if err != nil {
		t.Fatalf("start the collector: %v", err)
	}
	return &collector{p}
}

// kill9 kills the collector with SIGKILL, as an OOM kill or a node loss
// would, and waits until it is gone.
func (c *collector) kill9(t *testing.T) {
	t.Helper()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
}

// stop asks the collector to shut down and waits, bounded, for it.
func (c *collector) stop() { c.Stop(15 * time.Second) }

// logTail is the end of the collector's log file.
func logTail(path string, lines int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	var b strings.Builder
	for _, l := range all {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.String()
}
