package livetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Endpoint is the agent server every receiver is configured with, live
// and in replay: the Front behind proxy_url answers for it, so the AEP
// source (and with it every event id) is the same in both.
const Endpoint = "http://agent-server.test:8000"

// SessionKey is the agent server's session API key in the live test.
const SessionKey = "live-session-key"

// Modes are the receiver's socket modes the live test runs; Recorded are
// the ones make record keeps (auto picks session on this server).
var (
	Modes    = []string{"events", "session", "auto"}
	Recorded = []string{"events", "session"}
	Levels   = []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull}
)

// Label names one receiver: socket mode and capture level.
func Label(mode string, level aep.Capture) string { return mode + "-" + string(level) }

// ReceiverYAML is the openhands receiver configuration of one label, the
// same live (in the built collector's configuration) and in replay.
func ReceiverYAML(mode string, level aep.Capture, proxyURL string) string {
	return fmt.Sprintf(`servers:
  - endpoint: %s
    proxy_url: %s
    session_api_key: %s
    name: %s
    socket: %s
    timeout: 10s
poll_interval: 200ms
idle_detach: 0s
deltas: true
capture:
  level: %s
reconnect:
  initial_interval: 50ms
  max_interval: 500ms
`, Endpoint, proxyURL, SessionKey, Label(mode, level), mode, level)
}

// Indent indents every line of s by n spaces.
func Indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+pad) + "\n"
}

// Normalize is an emitted event as the recordings keep it: without the
// fields that legitimately differ between two runs over the same input,
// the receive time and the epoch (the receiver's start second).
func Normalize(ev *aep.Event) (json.RawMessage, error) {
	c := ev.Clone()
	c.Time = ""
	c.Epoch = nil
	return json.Marshal(c)
}

// SaveStream writes events, normalized, one a line.
func SaveStream(path string, events []*aep.Event) error {
	var b strings.Builder
	for _, ev := range events {
		raw, err := Normalize(ev)
		if err != nil {
			return err
		}
		b.Write(raw)
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// LoadStream reads what SaveStream wrote, one normalized event a line.
func LoadStream(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"), nil
}
