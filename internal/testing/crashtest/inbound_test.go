package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/vendorexport"
)

// inboundConfig runs the stock otlp receiver (HTTP and gRPC) into the
// aepinbound processor and the aeprelay exporter over HTTP POST, the
// binding that carries several agents (a socket carries its hello's one).
// A storageDir puts the processor's positions in file_storage there.
func inboundConfig(httpAddr, grpcAddr, relay, storageDir string) string {
	extensions, storage, enabled := "", "", ""
	if storageDir != "" {
		extensions = fmt.Sprintf("extensions:\n  file_storage:\n    directory: %s\n", storageDir)
		storage = "\n    storage: file_storage"
		enabled = "file_storage"
	}
	return fmt.Sprintf(`%s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
      grpc:
        endpoint: %s
processors:
  aepinbound:
    mode: primary%s
exporters:
  aeprelay:
    endpoint: %s
    token: %s
    transport: http
    timeout: 5s
    retry_on_failure:
      initial_interval: 10ms
      max_interval: 200ms
      max_elapsed_time: 0s
service:
  extensions: [%s]
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      processors: [aepinbound]
      exporters: [aeprelay]
`, extensions, httpAddr, grpcAddr, storage, relay, relayToken, enabled)
}

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// postOTLP sends ld to the otlp receiver's HTTP endpoint as protobuf or
// JSON, retrying while the collector is still starting.
func postOTLP(t *testing.T, addr string, ld plog.Logs, asJSON bool) {
	t.Helper()
	body, contentType, err := vendorexport.HTTPBody(ld, asJSON)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post("http://"+addr+"/v1/logs", contentType, bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("OTLP/HTTP export: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exportGRPC sends ld over OTLP/gRPC, waiting for the receiver to be ready.
func exportGRPC(t *testing.T, addr string, ld plog.Logs) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := vendorexport.ExportGRPC(ctx, addr, ld); err != nil {
		t.Fatal(err)
	}
}

// sessionTypes are the types the relay holds for one session, in order.
func sessionTypes(relay *aeprelaytest.Relay, agent, session string) []string {
	var types []string
	for _, r := range relay.SessionEvents("aep://otelcol/agent/"+agent+"/session/"+session, session) {
		types = append(types, r.Event.Type)
	}
	return types
}

func awaitTypes(t *testing.T, relay *aeprelaytest.Relay, agent, session string, want []string, logPath string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := relay.WaitFor(ctx, func(r *aeprelaytest.Relay) bool {
		return len(sessionTypes(r, agent, session)) >= len(want)
	})
	got := sessionTypes(relay, agent, session)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("session %s: types %v, want %v (%v)\ncollector log:\n%s", session, got, want, err, logTail(logPath, 30))
	}
}

// TestOTLPInbound sends Codex- and VS Code-shaped OTLP exports over
// OTLP/HTTP protobuf, OTLP/HTTP JSON and OTLP/gRPC to the built collector,
// kills it and sends more, and checks the AEP stream at the relay: the
// primary mode's types per session and no schema or stream violation.
// Without storage every session continues in a later epoch after the
// restart; with file_storage in the epoch it had, at the next seq.
func TestOTLPInbound(t *testing.T) {
	bin := collectorBinary(t)
	for _, tc := range []struct {
		name    string
		storage bool
	}{{"memory", false}, {"file_storage", true}} {
		t.Run(tc.name, func(t *testing.T) {
			otlpInbound(t, bin, tc.storage)
		})
	}
}

func otlpInbound(t *testing.T, bin string, withStorage bool) {
	dir := t.TempDir()
	relay := aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken, DrainTimeout: time.Second})
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	storageDir := ""
	if withStorage {
		storageDir = filepath.Join(dir, "storage")
		if err := os.Mkdir(storageDir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	config, log, logPath := collectorFiles(t, dir, inboundConfig(httpAddr, grpcAddr, relay.URL(), storageDir))

	col := startCollector(t, bin, log, config)
	postOTLP(t, httpAddr, vendorexport.Codex(0, "codex.conversation_starts", "codex.conversation_starts", "codex.tool_result", "codex.tool_decision"), false)
	postOTLP(t, httpAddr, vendorexport.VSCode(), true)
	exportGRPC(t, grpcAddr, vendorexport.Codex(10, "codex.api_request", "codex.user_prompt"))
	awaitTypes(t, relay, "codex", "019a-conv-a", []string{"session.started", "tool.completed", "x.codex.otel.api_request"}, logPath)
	awaitTypes(t, relay, "codex", "019a-conv-b", []string{"session.started", "tool.denied", "x.codex.otel.user_prompt"}, logPath)
	awaitTypes(t, relay, "vscode", "vsc-window-1", []string{"session.started", "tool.completed", "tool.failed",
		"x.vscode.otel.inference_details", "x.vscode.otel.session.start"}, logPath)

	// Killed and started again. Without storage the new process's epoch is
	// its start second, so the clock must move: a collector starts in
	// longer than a second, but the test does not lean on it.
	col.kill9(t)
	time.Sleep(1100 * time.Millisecond)
	col = startCollector(t, bin, log, config)
	defer col.stop()
	exportGRPC(t, grpcAddr, vendorexport.Codex(20, "codex.sse_event", "codex.sse_event"))
	awaitTypes(t, relay, "codex", "019a-conv-a", []string{"session.started", "tool.completed", "x.codex.otel.api_request", "x.codex.otel.sse_event"}, logPath)
	awaitTypes(t, relay, "codex", "019a-conv-b", []string{"session.started", "tool.denied", "x.codex.otel.user_prompt", "x.codex.otel.sse_event"}, logPath)

	var checker stream.Checker
	positions := map[string][][2]int64{}
	for _, r := range relay.Events() {
		if err := checker.Add(r.Event); err != nil {
			t.Errorf("stream: %v", err)
		}
		if r.Event.Capture != aep.CaptureMetadata {
			t.Errorf("%s %s: capture %s at the default ceiling", r.Event.Type, r.Event.ID, r.Event.Capture)
		}
		if bytes.Contains(r.Raw, []byte("dev@example.com")) || bytes.Contains(r.Raw, []byte("README.md")) {
			t.Errorf("%s %s carries content above the metadata ceiling: %s", r.Event.Type, r.Event.ID, r.Raw)
		}
		positions[r.Event.Session] = append(positions[r.Event.Session], [2]int64{r.Event.EffectiveEpoch(), *r.Event.Seq})
	}
	for _, v := range relay.Violations() {
		t.Errorf("relay: %s", v)
	}
	for _, session := range []string{"019a-conv-a", "019a-conv-b"} {
		p := positions[session]
		first, last := p[0], p[len(p)-1]
		switch {
		case withStorage && (last[0] != first[0] || last[1] != 3):
			t.Errorf("session %s: positions %v, want the first epoch continued at seq 3", session, p)
		case !withStorage && (last[0] <= first[0] || last[1] != 0):
			t.Errorf("session %s: positions %v, want a later epoch from seq 0", session, p)
		}
	}
}
