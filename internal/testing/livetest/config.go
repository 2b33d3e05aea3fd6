package livetest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// Normalize is the emitted events as the recordings keep them: grouped by
// session, in order, one JSON line each, without what legitimately differs
// between two runs over the same input. That is the receive time, the
// epoch (the receiver's start second), and with the epoch every id: a
// receiver without storage qualifies its source with the epoch, and ids
// derive from the source (and a session-socket delta's id from its receive
// time, the frame carrying no timestamp). So the source loses its ?epoch=
// and ids are numbered in order of appearance within the session, cause
// and subject renamed alike: which event names which stays exact. The
// traceparent's span ids derive from event ids too (an attention wait's
// from its request's), so they are numbered alike, per session.
func Normalize(events []*aep.Event) (map[string][]string, error) {
	names := map[string]map[string]string{} // session → id → name
	spans := map[string]map[string]string{} // session → span id → name
	out := map[string][]string{}
	for _, ev := range events {
		ids := names[ev.Session]
		if ids == nil {
			ids = map[string]string{}
			names[ev.Session] = ids
			spans[ev.Session] = map[string]string{}
		}
		if _, ok := ids[ev.ID]; !ok {
			ids[ev.ID] = "#" + strconv.Itoa(len(ids)+1)
		}
		c := ev.Clone()
		c.Traceparent = numberSpan(spans[ev.Session], c.Traceparent)
		c.Time, c.Epoch = "", nil
		c.Source, _, _ = strings.Cut(c.Source, "?epoch=")
		c.ID = ids[c.ID]
		for _, ref := range []*string{&c.Cause, &c.Subject} {
			if name, ok := ids[*ref]; ok {
				*ref = name
			}
		}
		raw, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		out[ev.Session] = append(out[ev.Session], string(raw))
	}
	return out, nil
}

// numberSpan replaces a traceparent's span id by its number of appearance.
func numberSpan(spans map[string]string, traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 {
		return traceparent
	}
	if _, ok := spans[parts[2]]; !ok {
		spans[parts[2]] = "span#" + strconv.Itoa(len(spans)+1)
	}
	parts[2] = spans[parts[2]]
	return strings.Join(parts, "-")
}

// SaveStream writes events, normalized, one a line, session after
// session, gzipped.
func SaveStream(path string, events []*aep.Event) error {
	bySession, err := Normalize(events)
	if err != nil {
		return err
	}
	sessions := make([]string, 0, len(bySession))
	for s := range bySession {
		sessions = append(sessions, s)
	}
	slices.Sort(sessions)
	var b bytes.Buffer
	for _, s := range sessions {
		for _, line := range bySession[s] {
			b.WriteString(line)
			b.WriteByte('\n')
		}
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

// LoadStream reads what SaveStream wrote, by session.
func LoadStream(path string) (map[string][]string, error) {
	raw, err := readGzip(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		var ev struct {
			Session string `json:"session"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[ev.Session] = append(out[ev.Session], line)
	}
	return out, nil
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
