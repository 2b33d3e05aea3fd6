//go:build live

package livetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// fleetMember is one real agent server of the fleet, with a key of its
// own (besides SessionKey, which the test's own REST calls use).
type fleetMember struct {
	*agentServer
	key  string
	conv string // its conversation
}

func startFleetMember(ctx context.Context, t *testing.T, python, llmURL, key string) *fleetMember {
	s := startAgentServer(t, python, "OH_SESSION_API_KEYS_1="+key)
	conv, err := s.createConversation(ctx, llmURL, conversationSpec{script: "tools"})
	require.NoError(t, err)
	return &fleetMember{agentServer: s, key: key, conv: conv}
}

// group is the member's service-discovery entry.
func (m *fleetMember) group(team string) map[string]any {
	return map[string]any{"targets": []string{strings.TrimPrefix(m.url, "http://")},
		"labels": map[string]string{"team": team, "__openhands_session_api_key__": m.key}}
}

// name is what the receiver calls a target: its endpoint's identity.
func (m *fleetMember) name() string { return m.url }

// TestLiveTargets follows a fleet of real agent servers, each with its own
// key, through both Prometheus formats at once: a in a file_sd file, b
// served over http_sd; b is killed and leaves its source, c is started and
// joins the file. Each conversation is observed once, b's session ends
// after the grace, c's conversation is attached.
func TestLiveTargets(t *testing.T) {
	python, bin, llm := liveTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := startFleetMember(ctx, t, python, llm.BaseURL(), "fleet-key-a")
	b := startFleetMember(ctx, t, python, llm.BaseURL(), "fleet-key-b")

	dir := t.TempDir()
	file := filepath.Join(dir, "agents.json")
	writeSD := func(groups ...map[string]any) {
		raw, err := json.Marshal(append([]map[string]any{}, groups...))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(file+".tmp", raw, 0o600))
		require.NoError(t, os.Rename(file+".tmp", file))
	}
	writeSD(a.group("red"))
	var mu sync.Mutex
	served := []map[string]any{b.group("blue")}
	sd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewEncoder(w).Encode(served)
	}))
	defer sd.Close()

	sink := startOTLPSink(t)
	const grace = 3 * time.Second
	col := startCollectorProcess(t, bin, fmt.Sprintf(`receivers:
  openhands:
    targets:
      file_sd:
        - files: [%s]
          refresh_interval: 200ms
      http_sd:
        - endpoint: %s
          refresh_interval: 200ms
      grace: %s
      timeout: 5s
    poll_interval: 200ms
    idle_detach: 0s
    reconnect:
      initial_interval: 50ms
      max_interval: 500ms
exporters:
  otlp_http:
    endpoint: %s
    compression: none
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [openhands]
      exporters: [otlp_http]
`, file, sd.URL, grace, sink.URL()))
	logOnFailure(t, b.agentServer, col)

	typesOf := func(m *fleetMember) []string {
		var out []string
		for _, ev := range sink.events(m.name()) {
			if ev.Session == m.conv {
				out = append(out, ev.Type)
			}
		}
		return out
	}
	has := func(m *fleetMember, typ string) func() (bool, error) {
		return func() (bool, error) { return count(typesOf(m), typ) > 0, nil }
	}
	require.NoError(t, poll(ctx, "a's conversation (file_sd)", has(a, "session.started")))
	require.NoError(t, poll(ctx, "b's conversation (http_sd)", has(b, "session.started")))

	killed := time.Now()
	b.stop()
	mu.Lock()
	served = nil
	mu.Unlock()
	require.NoError(t, poll(ctx, "b's session ended after the grace", has(b, "session.ended")))
	t.Logf("b's session ended %s after it was killed (grace %s)", time.Since(killed).Round(100*time.Millisecond), grace)
	assert.GreaterOrEqual(t, time.Since(killed), grace, "not before the grace")

	c := startFleetMember(ctx, t, python, llm.BaseURL(), "fleet-key-c")
	writeSD(a.group("red"), c.group("red"))
	require.NoError(t, poll(ctx, "c's conversation attached", has(c, "session.started")))

	for _, m := range []*fleetMember{a, b, c} {
		assert.Equal(t, 1, count(typesOf(m), "session.started"), "%s's conversation observed once", m.name())
	}
	assert.Zero(t, count(typesOf(a), "session.ended"), "a, still listed, keeps its session")
	assert.Empty(t, sink.errors())
	for _, ev := range sink.events(a.name()) {
		assert.Equal(t, aep.Version, ev.AEP)
	}
}

func count(types []string, typ string) int {
	n := 0
	for _, t := range types {
		if t == typ {
			n++
		}
	}
	return n
}
