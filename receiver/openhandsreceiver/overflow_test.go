package openhandsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// TestMaxConversationsOverflow: past max_conversations the remaining
// conversations wait, reported as a metric, a component status and a
// warning, and get sockets as slots free up, most recently updated first.
func TestMaxConversationsOverflow(t *testing.T) {
	stub := startStub(t)
	oldest, older := createConversation(t, stub), createConversation(t, stub)
	newer, newest := createConversation(t, stub), createConversation(t, stub)
	// Search lists them by creation; updates reorder them.
	mustAppend(t, older, oh.MessageEvent("user", "updated after creation"))
	mustAppend(t, newer, oh.MessageEvent("user", "updated later"))
	mustAppend(t, newest, oh.MessageEvent("user", "updated last"))
	// The two that get slots run: an idle one quiet for a poll interval
	// gives its slot up to a waiting one (TestNewActivityIsNotStarvedByIdleHistory),
	// which under load had a slot's waiting pair attach together.
	mustStatus(t, newer, oh.StatusRunning)
	mustStatus(t, newest, oh.StatusRunning)

	core, logs := observer.New(zapcore.WarnLevel)
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].MaxConversations = 2
	h := startHarnessLogging(t, cfg, nil, zap.New(core))
	overflow := func() int64 { return h.metric("otelcol_openhands_conversations_overflow", "server", stub.Addr()) }

	h.waitLive(newest, 1)
	h.waitLive(newer, 1)
	require.Eventually(t, func() bool { return overflow() == 2 }, waitFor, tick)
	assert.Equal(t, componentstatus.StatusRecoverableError, h.host.last())
	assert.Zero(t, oldest.Sockets()+older.Sockets())
	assert.Empty(t, h.session(older.ID()), "a waiting conversation's session has not started")
	warnings := logs.FilterMessageSnippet("wait for a socket").All()
	require.NotEmpty(t, warnings)
	assert.Equal(t, int64(2), warnings[0].ContextMap()["max_conversations"])
	assert.Equal(t, stub.Addr(), warnings[0].ContextMap()["server"])

	// A slot frees up: the most recently updated waiting one takes it.
	require.NoError(t, newer.Delete())
	h.waitLive(older, 1)
	require.Eventually(t, func() bool { return overflow() == 1 }, waitFor, tick)
	assert.Zero(t, oldest.Sockets())

	require.NoError(t, newest.Delete())
	h.waitLive(oldest, 1)
	require.Eventually(t, func() bool { return overflow() == 0 }, waitFor, tick)
	assert.Eventually(t, func() bool { return h.host.last() == componentstatus.StatusOK }, waitFor, tick)
	h.validate()
}

func TestConnectionBudget(t *testing.T) {
	for _, tc := range []struct {
		nofile                 uint64
		servers                int
		conversations, restCap int
	}{
		{1024, 1, 704, 64},           // (1024-256) = 768: 64 REST, 704 sockets
		{1024, 4, 168, 24},           // 192 each: 24 REST, 168 sockets
		{65536, 1, 1000, 64},         // REST capped at 64, sockets at the default 1,000
		{20000, 40, 432, 61},         // (20000-256)/40 = 493: 61 REST, 432 sockets
		{300, 1, 132, 18},            // a tiny limit keeps half: 150
		{1 << 62, 2, 1000, 64},       // unlimited counts as 2^20, the default caps it
		{256, 1000, 1, minRESTConns}, // never zero
	} {
		conversations, rest := connectionBudget(tc.nofile, tc.servers)
		assert.Equal(t, tc.conversations, conversations, "nofile %d, %d servers", tc.nofile, tc.servers)
		assert.Equal(t, tc.restCap, rest, "nofile %d, %d servers", tc.nofile, tc.servers)
	}
	assert.Positive(t, descriptorLimit())
}
