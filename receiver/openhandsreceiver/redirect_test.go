package openhandsreceiver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// requestLog records the requests a server received.
type requestLog struct {
	mu       sync.Mutex
	requests []*http.Request
}

func (l *requestLog) record(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests = append(l.requests, r)
}

func (l *requestLog) count(method, pathPrefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.requests {
		if (method == "" || r.Method == method) && strings.HasPrefix(r.URL.Path, pathPrefix) {
			n++
		}
	}
	return n
}

// startRedirectTarget is the host a hostile server redirects to: it
// records whatever reaches it.
func startRedirectTarget(t *testing.T) (*httptest.Server, *requestLog) {
	t.Helper()
	var got requestLog
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(target.Close)
	return target, &got
}

// startFront stands in front of the stub as a gateway under prefix would,
// and records every request: intercept may answer one itself (a hostile
// server's doing); the rest pass through to the stub, sockets included.
func startFront(t *testing.T, stub *oh.Server, prefix string, intercept func(w http.ResponseWriter, r *http.Request) bool) (*httptest.Server, *requestLog) {
	t.Helper()
	stubURL, err := url.Parse(stub.URL())
	require.NoError(t, err)
	pass := http.StripPrefix(prefix, httputil.NewSingleHostReverseProxy(stubURL))
	var seen requestLog
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.record(r)
		if !intercept(w, r) {
			pass.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(front.Close)
	return front, &seen
}

// redirectTo answers the requests that match with a redirect to target
// (same path).
func redirectTo(target string, code int, match func(*http.Request) bool) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !match(r) {
			return false
		}
		http.Redirect(w, r, target+r.URL.RequestURI(), code)
		return true
	}
}

// TestSearchRedirectIsRefused: a 302 on search never takes the session
// key to the redirect target; the search fails with a clear error.
func TestSearchRedirectIsRefused(t *testing.T) {
	stub := startStub(t)
	createConversation(t, stub)
	target, reached := startRedirectTarget(t)
	front, seen := startFront(t, stub, "", redirectTo(target.URL, http.StatusFound, func(r *http.Request) bool {
		return r.URL.Path == "/api/conversations/search"
	}))
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].Endpoint = front.URL
	h := startHarness(t, cfg)

	require.Eventually(t, func() bool { return seen.count(http.MethodGet, "/api/conversations/search") >= 3 }, waitFor, tick)
	assert.Zero(t, reached.count("", "/"), "a request followed the redirect")
	h.host.mu.Lock()
	last := h.host.events[len(h.host.events)-1]
	h.host.mu.Unlock()
	require.Error(t, last.Err())
	assert.ErrorIs(t, last.Err(), errRedirectRefused)
	assert.Contains(t, last.Err().Error(), "agent server API never redirects")
}

// TestControlWriteRedirectIsRefused: a 307 on a control POST (which
// would carry the session key and the operator's text) never reaches the
// redirect target: the gate writes with the receiver's client.
func TestControlWriteRedirectIsRefused(t *testing.T) {
	stub := startStub(t)
	conv, err := stub.CreateConversation(oh.ConversationOptions{Status: oh.StatusRunning})
	require.NoError(t, err)
	target, reached := startRedirectTarget(t)
	front, seen := startFront(t, stub, "", redirectTo(target.URL, http.StatusTemporaryRedirect, func(r *http.Request) bool {
		return r.Method == http.MethodPost
	}))

	gateID := component.MustNewID("openhandscontrol")
	gateCfg := openhandscontrol.NewFactory().CreateDefaultConfig().(*openhandscontrol.Config)
	gateCfg.Enabled = true
	gateSet := extensiontest.NewNopSettings(openhandscontrol.NewFactory().Type())
	gate, err := openhandscontrol.NewFactory().Create(context.Background(), gateSet, gateCfg)
	require.NoError(t, err)
	require.NoError(t, gate.Start(context.Background(), nil))
	t.Cleanup(func() { require.NoError(t, gate.Shutdown(context.Background())) })

	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].Endpoint = front.URL
	cfg.Control = &gateID
	h := startHarnessWith(t, cfg, map[component.ID]component.Component{gateID: gate})
	h.waitLive(conv, 1)

	handler := gate.(interface {
		HandleCommand(ctx context.Context, raw []byte, ev *aep.Event, authenticated bool)
	})
	handler.HandleCommand(context.Background(), nil, &aep.Event{
		AEP: aep.Version, ID: "cmd-1", Type: "control.pause", Source: "aep://ops", Agent: "ops", Session: conv.ID(),
	}, true)
	require.Eventually(t, func() bool { return seen.count(http.MethodPost, "/api/conversations/") > 0 }, waitFor, tick)
	var ack *aep.Event
	require.Eventually(t, func() bool {
		for _, ev := range h.session(conv.ID()) {
			if strings.HasPrefix(ev.Type, "control.") && ev.Cause == "cmd-1" {
				ack = ev
				return true
			}
		}
		return false
	}, waitFor, tick)
	assert.NotEqual(t, "control.accepted", ack.Type, "a refused redirect is no accepted write")
	assert.Zero(t, reached.count("", "/"), "a request followed the redirect")
	assert.Equal(t, oh.StatusRunning, conv.Status())
}

// TestSocketDialDoesNotFollowRedirects pins that the WebSocket dialer
// (gorilla) treats a redirect as a failed handshake: the auth frame and
// its key never reach the redirect target.
func TestSocketDialDoesNotFollowRedirects(t *testing.T) {
	target, reached := startRedirectTarget(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(front.Close)
	base, err := url.Parse(front.URL)
	require.NoError(t, err)
	api := &serverClient{name: "front", base: base, key: testKey, dialer: &websocket.Dialer{HandshakeTimeout: 5 * time.Second}}
	api.legacyOnly.Store(true)
	_, _, _, err = api.dialConversation(context.Background(), "3f2c8a4e-1b7d-4c2e-9a51-0d6f7e8b9c10", -1, false)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	assert.Contains(t, err.Error(), "307")
	assert.Zero(t, reached.count("", "/"))
}
