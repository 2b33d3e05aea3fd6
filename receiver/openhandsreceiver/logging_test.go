package openhandsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// TestEveryFailingServerIsLogged: rate limiting is per server, so while one
// server's search keeps failing, a second server failing the same way is
// still logged, and each line names its server.
func TestEveryFailingServerIsLogged(t *testing.T) {
	slow, other := startStub(t), startStub(t)
	core, logs := observer.New(zapcore.WarnLevel)
	slow.SetConversationSearchFault(oh.SearchServerError)
	startHarnessLogging(t, fastConfig(socketEvents, slow, other), nil, zap.New(core))

	failures := func() map[string]int {
		byServer := map[string]int{}
		for _, e := range logs.FilterMessage("conversation search failed").All() {
			server, _ := e.ContextMap()["server"].(string)
			byServer[server]++
		}
		return byServer
	}
	assert.Eventually(t, func() bool { return failures()[slow.Addr()] == 1 }, waitFor, tick)
	// Later failures of the first server stay suppressed; the second
	// server's own failures still get their line.
	other.SetConversationSearchFault(oh.SearchGarbage)
	assert.Eventually(t, func() bool { return failures()[other.Addr()] == 1 }, waitFor, tick,
		"the second server's failure must be logged while the first keeps failing")
	waitRoundsEnded(t, slow, 3)
	waitRoundsEnded(t, other, 3)
	assert.Equal(t, map[string]int{slow.Addr(): 1, other.Addr(): 1}, failures(), "one line per server per interval")
}

// TestPlaintextWarnedOncePerServer: a server reached over plaintext http
// on a host that is not loopback gets one warning at start when its
// session key travels on it. (An open gate's writes are the gate's to warn
// of: TestOpenGateWarnsOfPlaintextServers.)
func TestPlaintextWarnedOncePerServer(t *testing.T) {
	servers := []ServerConfig{
		{SessionAPIKey: "k", Name: "keyed"},
		{Name: "keyless"},
		{SessionAPIKey: "k", Name: "loopback"},
		{SessionAPIKey: "k", Name: "tls"},
	}
	for i, e := range []string{"http://agents.example:8000", "http://10.0.0.7:8000", "http://127.0.0.1:8000", "https://agents.example"} {
		servers[i].Endpoint = e
	}
	core, logs := observer.New(zapcore.WarnLevel)
	cfg := createDefaultConfig().(*Config)
	cfg.Servers = servers
	r := &openhandsReceiver{cfg: cfg}
	r.set.Logger = zap.New(core)
	r.warnPlaintext()
	got := map[string][]any{}
	for _, e := range logs.All() {
		fields := e.ContextMap()
		got[fields["key"].(string)] = fields["carries"].([]any)
	}
	assert.Equal(t, map[string][]any{"servers[0].endpoint": {"session_api_key"}}, got)
	assert.Equal(t, 1, logs.Len(), "one warning per server")
}
