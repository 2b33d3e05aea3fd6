package livetest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
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
// the receive time and the epoch (the receiver's start second), and
// without the time part of a streaming delta's id: a /sockets/session
// delta frame carries no timestamp, so its id takes the receive time (the
// id's 10-character ULID time prefix); the rest of the id is the hash of
// its vendor identity and stays exact.
func Normalize(ev *aep.Event) (json.RawMessage, error) {
	c := ev.Clone()
	c.Time = ""
	c.Epoch = nil
	if c.Type == deltaType && len(c.ID) == ulidLength {
		c.ID = strings.Repeat("*", ulidTimeLength) + c.ID[ulidTimeLength:]
	}
	return json.Marshal(c)
}

const (
	deltaType      = "x.openhands.streaming.delta"
	ulidLength     = 26
	ulidTimeLength = 10
)

// SaveStream writes events, normalized, one a line, gzipped.
func SaveStream(path string, events []*aep.Event) error {
	var b bytes.Buffer
	for _, ev := range events {
		raw, err := Normalize(ev)
		if err != nil {
			return err
		}
		b.Write(raw)
		b.WriteByte('\n')
	}
	return writeGzip(path, b.Bytes())
}

// writeGzip writes raw to path, gzipped.
func writeGzip(path string, raw []byte) error {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(raw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// LoadStream reads what SaveStream wrote, one normalized event a line.
func LoadStream(path string) ([]string, error) {
	raw, err := readGzip(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"), nil
}

// readGzip reads a gzipped file whole.
func readGzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return raw, nil
}
