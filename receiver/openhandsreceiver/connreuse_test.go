package openhandsreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// TestPollsReuseTheirConnection: an agent server configured in YAML, or
// discovered, is polled over kept-alive connections, not a new TCP (and
// TLS) handshake per request; `keepalive: {enabled: false}` still opens
// one per request.
func TestPollsReuseTheirConnection(t *testing.T) {
	const rounds = 8
	for _, tc := range []struct {
		name string
		// server is the servers entry beyond its endpoint and key; nil
		// puts the stub behind a file_sd source instead.
		server     map[string]any
		reusesConn bool
	}{
		{name: "servers entry", server: map[string]any{}, reusesConn: true},
		{name: "keepalive disabled", server: map[string]any{"keepalive": map[string]any{"enabled": false}}},
		{name: "discovered target", reusesConn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := startKeyedStub(t, testKey)
			raw := map[string]any{"poll_interval": "20ms"}
			if tc.server != nil {
				entry := map[string]any{"endpoint": stub.URL(), "session_api_key": testKey}
				for k, v := range tc.server {
					entry[k] = v
				}
				raw["servers"] = []any{entry}
			} else {
				file := newSDFile(t, "agents.json")
				file.write(stub.group("red"))
				raw["targets"] = map[string]any{"file_sd": []any{map[string]any{"files": []any{file.path}, "refresh_interval": "1h"}}}
			}
			cfg := createDefaultConfig().(*Config)
			require.NoError(t, confmap.NewFromStringMap(raw).Unmarshal(cfg))
			startHarness(t, cfg)

			var gets []oh.Request
			require.Eventually(t, func() bool {
				gets = gets[:0]
				for _, r := range stub.Requests() {
					if r.Method == "GET" && r.Status != 0 {
						gets = append(gets, r)
					}
				}
				return len(gets) >= rounds
			}, 10*time.Second, 10*time.Millisecond)
			conns := map[string]bool{}
			for _, r := range gets {
				conns[r.RemoteAddr] = true
			}
			if tc.reusesConn {
				assert.LessOrEqual(t, len(conns), 2, "%d REST requests", len(gets))
			} else {
				assert.Len(t, conns, len(gets), "a connection per request")
			}
		})
	}
}
