package openhandsreceiver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/targets"
)

// keyedStub is a stub agent server with a key of its own.
type keyedStub struct {
	*oh.Server
	key string
}

func startKeyedStub(t *testing.T, key string) keyedStub {
	return keyedStub{oh.Start(t, oh.Config{SessionAPIKeys: []string{key}}), key}
}

// group is the http_sd / file_sd entry of one stub, its key inline.
func (s keyedStub) group(team string) targets.Group {
	return targets.Group{Targets: []string{s.Addr()}, Labels: map[string]string{
		"team": team, targets.LabelKey: s.key}}
}

// targetsConfig is fastConfig with no static server and a short grace.
func targetsConfig() *Config {
	cfg := fastConfig(socketSession)
	cfg.Targets.Grace = 300 * time.Millisecond
	cfg.Targets.AttachRate = 1000
	return cfg
}

// sdFile is a file_sd file a test rewrites.
type sdFile struct {
	t    *testing.T
	path string
}

func newSDFile(t *testing.T, name string) sdFile {
	return sdFile{t, filepath.Join(t.TempDir(), name)}
}

// write replaces the file atomically, as a writer of file_sd should.
func (f sdFile) write(groups ...targets.Group) {
	f.t.Helper()
	data, err := json.Marshal(append([]targets.Group{}, groups...))
	require.NoError(f.t, err)
	f.writeRaw(data)
}

func (f sdFile) writeRaw(data []byte) {
	f.t.Helper()
	tmp := f.path + ".tmp"
	require.NoError(f.t, os.WriteFile(tmp, data, 0o600))
	require.NoError(f.t, os.Rename(tmp, f.path))
}

func withFileSD(cfg *Config, path string) *Config {
	cfg.Targets.FileSD = []FileSDConfig{{Files: []string{path}, SourceLimits: SourceLimits{RefreshInterval: 20 * time.Millisecond}}}
	return cfg
}

// sdServer serves http_sd; a test swaps its answer.
type sdServer struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	body   []byte
}

func startSDServer(t *testing.T) *sdServer {
	s := &sdServer{status: http.StatusOK, body: []byte("[]")}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		status, body := s.status, s.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sdServer) serve(t *testing.T, groups ...targets.Group) {
	data, err := json.Marshal(append([]targets.Group{}, groups...))
	require.NoError(t, err)
	s.answer(http.StatusOK, data)
}

func (s *sdServer) answer(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

// lastErr is the error of the last status reported.
func (h *statusHost) lastErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return nil
	}
	return h.events[len(h.events)-1].Err()
}

func withHTTPSD(cfg *Config, url string) *Config {
	sd := HTTPSDConfig{SourceLimits: SourceLimits{RefreshInterval: 20 * time.Millisecond}}
	sd.Endpoint = url
	cfg.Targets.HTTPSD = []HTTPSDConfig{sd}
	return cfg
}

// resourceOf is the resource attribute key of the session's events.
func (h *harness) resourceOf(session, key string) string {
	h.t.Helper()
	for _, logs := range h.sink.AllLogs() {
		for i := range logs.ResourceLogs().Len() {
			rl := logs.ResourceLogs().At(i)
			for j := range rl.ScopeLogs().Len() {
				records := rl.ScopeLogs().At(j).LogRecords()
				for k := range records.Len() {
					if s, ok := records.At(k).Attributes().Get("aep.session_id"); ok && s.Str() == session {
						v, _ := rl.Resource().Attributes().Get(key)
						return v.AsString()
					}
				}
			}
		}
	}
	return ""
}

// TestFileSDFollowsTheFleet runs churn through a file_sd file: servers
// appear, one vanishes while alive (let go after grace, its session left
// open), one is killed and vanishes (its session ended after grace), a
// new one's conversation attaches, and every conversation is observed
// once.
func TestFileSDFollowsTheFleet(t *testing.T) {
	a, b, c := startKeyedStub(t, "key-a"), startKeyedStub(t, "key-b"), startKeyedStub(t, "key-c")
	convA, convB := createConversation(t, a.Server), createConversation(t, b.Server)
	file := newSDFile(t, "agents.json")
	file.write(a.group("red"), b.group("blue"))
	h := startHarness(t, withFileSD(targetsConfig(), file.path))
	h.waitLive(convA, 1)
	h.waitLive(convB, 1)
	assert.Equal(t, "red", h.resourceOf(convA.ID(), "team"), "a label is a resource attribute")
	assert.Equal(t, "blue", h.resourceOf(convB.ID(), "team"))

	// b is killed, then vanishes: unreachable past grace, its session ends.
	b.Close()
	file.write(a.group("red"))
	h.waitTypes(convB.ID(), "session.ended")

	// c appears.
	convC := createConversation(t, c.Server)
	file.write(a.group("red"), c.group("red"))
	h.waitLive(convC, 1)

	// a vanishes while alive: let go after grace, its session left open.
	file.write(c.group("red"))
	waitSockets(t, convA, 0)
	assert.Zero(t, count(h.session(convA.ID()), "session.ended"), "a server still reachable keeps its sessions open")

	for _, conv := range []*oh.Conversation{convA, convB, convC} {
		assert.Equal(t, 1, count(h.session(conv.ID()), "session.started"), "conversation %s observed once", conv.ID())
	}
	h.validate()
	for _, r := range c.Requests() {
		assert.NotContains(t, []string{"key-a", "key-b"}, r.Header.Get("X-Session-API-Key"), "a key travels only to its own server")
	}
}

// TestFlappingTargetKeepsItsSession lists a server, drops it, lists it
// again within grace, many times: its one session neither ends nor
// starts again.
func TestFlappingTargetKeepsItsSession(t *testing.T) {
	a := startKeyedStub(t, "key-a")
	conv := createConversation(t, a.Server)
	file := newSDFile(t, "agents.yaml")
	file.write(a.group("red"))
	cfg := withFileSD(targetsConfig(), file.path)
	cfg.Targets.Grace = 1500 * time.Millisecond // shorter than the flapping, longer than one flap
	h := startHarness(t, cfg)
	h.waitLive(conv, 1)
	for range 30 {
		file.writeRaw([]byte("[]"))
		time.Sleep(30 * time.Millisecond) // about one refresh; a flap, not an assertion
		file.write(a.group("red"))
		time.Sleep(30 * time.Millisecond)
	}
	mustAppend(t, conv, oh.MessageEvent("user", "still here"))
	h.waitTypes(conv.ID(), "x.openhands.message.event")
	evs := h.session(conv.ID())
	assert.Equal(t, 1, count(evs, "session.started"))
	assert.Zero(t, count(evs, "session.ended"))
	assert.Equal(t, 1, count(evs, "state.snapshot"), "one socket all along")
}

// TestHTTPSDFailingSourceEndsNothing serves targets over http_sd, then
// fails (500, garbage, a body past max_bytes): the last good set stands.
func TestHTTPSDFailingSourceEndsNothing(t *testing.T) {
	a := startKeyedStub(t, "key-a")
	conv := createConversation(t, a.Server)
	sd := startSDServer(t)
	sd.serve(t, a.group("red"))
	cfg := withHTTPSD(targetsConfig(), sd.URL)
	cfg.Targets.HTTPSD[0].MaxBytes = 4096
	h := startHarness(t, cfg)
	h.waitLive(conv, 1)
	failed := func() int64 { return h.metric("otelcol_openhands_target_refreshes", "outcome", "failed") }
	for _, fail := range []struct {
		status int
		body   string
	}{
		{http.StatusInternalServerError, "[]"},
		{http.StatusOK, "not json"},
		{http.StatusOK, `[{"targets":[],"labels":{"pad":"` + strings.Repeat("x", 5000) + `"}}]`},
	} {
		sd.answer(fail.status, []byte(fail.body))
		// Several refreshes of the failing source: one may have begun
		// before the answer changed.
		want := failed() + 3
		require.Eventually(t, func() bool { return failed() >= want }, waitFor, tick)
	}
	mustAppend(t, conv, oh.MessageEvent("user", "still observed"))
	h.waitTypes(conv.ID(), "x.openhands.message.event")
	assert.Zero(t, count(h.session(conv.ID()), "session.ended"), "a failed refresh never ends a session")
	assert.Positive(t, failed())

	sd.serve(t) // a good, empty set: a goes, alive, after grace
	waitSockets(t, conv, 0)
}

// TestHTTPSDRefusesRedirects: a source that redirects is a failed
// refresh; its headers never reach the host the redirect names.
func TestHTTPSDRefusesRedirects(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		_, _ = w.Write([]byte("[]"))
	}))
	defer other.Close()
	var asked atomic.Int32
	redirect := http.RedirectHandler(other.URL, http.StatusFound)
	sd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		redirect.ServeHTTP(w, r)
	}))
	defer sd.Close()
	cfg := withHTTPSD(targetsConfig(), sd.URL)
	cfg.Targets.HTTPSD[0].Headers.Set("X-Api-Key", "sd-secret")
	startHarness(t, cfg)
	require.Eventually(t, func() bool { return asked.Load() >= 3 }, waitFor, tick, "the source is refreshed")
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, elsewhere, "no request followed the redirect")
}

// TestMaxTargetsQueuesTheRest lists three servers with room for one: one
// is watched, the health says the others wait, and each gets its turn as
// the one before vanishes.
func TestMaxTargetsQueuesTheRest(t *testing.T) {
	stubs := []keyedStub{startKeyedStub(t, "k0"), startKeyedStub(t, "k1"), startKeyedStub(t, "k2")}
	var convs []*oh.Conversation
	var groups []targets.Group
	for _, s := range stubs {
		convs = append(convs, createConversation(t, s.Server))
		groups = append(groups, s.group("red"))
	}
	file := newSDFile(t, "agents.json")
	file.write(groups...)
	cfg := withFileSD(targetsConfig(), file.path)
	cfg.Targets.MaxTargets = 1
	h := startHarness(t, cfg)
	for i := range stubs {
		h.waitLive(convs[i], 1)
		require.Eventually(t, func() bool { return (h.host.last() == componentstatus.StatusRecoverableError) == (i < 2) }, waitFor, tick)
		for _, later := range convs[i+1:] {
			assert.Empty(t, h.session(later.ID()), "one server watched at once")
		}
		file.write(groups[i+1:]...)
		waitSockets(t, convs[i], 0)
	}
}

// TestKeyLabels reads a target's key from the file in session_api_key_dir
// or the variable under the prefix named after its host and port, and
// refuses any other file or variable: a source cannot send one server's
// key to another host.
func TestKeyLabels(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.example_8000"), []byte("key-a\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "evil.example_80"), []byte("key-evil\n"), 0o600))
	outside := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("not yours"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link_1")))
	require.NoError(t, os.Symlink("a.example_8000", filepath.Join(dir, "inside_1"))) // a Secret volume's shape
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo_1"), 0o600))
	t.Setenv("OPENHANDS_KEY_B_EXAMPLE_443", "key-b")
	t.Setenv("OTHER_SECRET", "not yours")
	p := &targetPool{cfg: &TargetsConfig{SessionAPIKeyDir: dir, SessionAPIKeyEnvPrefix: "OPENHANDS_KEY_"}}
	for _, tc := range []struct {
		name     string
		endpoint string
		ref      targets.KeyRef
		want     string
		err      bool
	}{
		{name: "inline", endpoint: "http://a.example:8000", ref: targets.KeyRef{Source: targets.KeyInline, Value: "k"}, want: "k"},
		{name: "the host's file", endpoint: "http://A.example:8000", ref: targets.KeyRef{Source: targets.KeyFile, Value: "a.example_8000"}, want: "key-a"},
		{name: "another host's file", endpoint: "http://evil.example:80", ref: targets.KeyRef{Source: targets.KeyFile, Value: "a.example_8000"}, err: true},
		{name: "another port's file", endpoint: "http://a.example:9000", ref: targets.KeyRef{Source: targets.KeyFile, Value: "a.example_8000"}, err: true},
		{name: "out by ..", endpoint: "http://a.example", ref: targets.KeyRef{Source: targets.KeyFile, Value: "../" + filepath.Base(filepath.Dir(outside)) + "/secret"}, err: true},
		{name: "absolute", endpoint: "http://a.example", ref: targets.KeyRef{Source: targets.KeyFile, Value: outside}, err: true},
		{name: "symlink out", endpoint: "http://link:1", ref: targets.KeyRef{Source: targets.KeyFile, Value: "link_1"}, err: true},
		{name: "symlink in", endpoint: "http://inside:1", ref: targets.KeyRef{Source: targets.KeyFile, Value: "inside_1"}, want: "key-a"},
		{name: "fifo", endpoint: "http://fifo:1", ref: targets.KeyRef{Source: targets.KeyFile, Value: "fifo_1"}, err: true}, // and does not block
		{name: "the host's variable", endpoint: "https://b.example", ref: targets.KeyRef{Source: targets.KeyEnv, Value: "OPENHANDS_KEY_B_EXAMPLE_443"}, want: "key-b"},
		{name: "another host's variable", endpoint: "https://evil.example", ref: targets.KeyRef{Source: targets.KeyEnv, Value: "OPENHANDS_KEY_B_EXAMPLE_443"}, err: true},
		{name: "a variable out of the prefix", endpoint: "https://b.example", ref: targets.KeyRef{Source: targets.KeyEnv, Value: "OTHER_SECRET"}, err: true},
		{name: "none", endpoint: "http://a.example", ref: targets.KeyRef{}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.keyOf(tc.ref, tc.endpoint)
			if tc.err {
				assert.Error(t, err, "%s %s", tc.ref, tc.ref.Value)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
	unset := &targetPool{cfg: &TargetsConfig{}}
	_, err := unset.keyOf(targets.KeyRef{Source: targets.KeyFile, Value: "a.example_80"}, "http://a.example")
	assert.ErrorContains(t, err, "session_api_key_dir is not set")
	_, err = unset.keyOf(targets.KeyRef{Source: targets.KeyEnv, Value: "OPENHANDS_KEY_A_EXAMPLE_80"}, "http://a.example")
	assert.Error(t, err)
}

// TestSourceBounds: a file over max_bytes or listing past max_targets
// fails the refresh.
func TestSourceBounds(t *testing.T) {
	file := newSDFile(t, "agents.json")
	src := newFileSource(0, FileSDConfig{Files: []string{file.path}, SourceLimits: SourceLimits{MaxTargets: 2, MaxBytes: 200}})
	file.writeRaw([]byte(`[{"targets":["a:1","b:1"]}]`))
	u := src.refresh(context.Background(), 0)
	require.NoError(t, u.err)
	assert.Len(t, u.targets, 2)
	file.writeRaw([]byte(`[{"targets":["a:1","b:1","c:1"]}]`))
	assert.ErrorContains(t, src.refresh(context.Background(), 0).err, "more than 2 targets")
	file.writeRaw([]byte(`[{"targets":["` + strings.Repeat("a", 300) + `"]}]`))
	assert.ErrorContains(t, src.refresh(context.Background(), 0).err, "larger than max_bytes")
	require.NoError(t, os.Remove(file.path))
	u = src.refresh(context.Background(), 0)
	require.NoError(t, u.err)
	assert.Empty(t, u.targets, "a file gone lists no targets")
}

// TestFiveThousandTargetsWaitTheirTurn lists 5,000 servers: only
// max_targets are watched, the rest wait, visibly.
func TestFiveThousandTargetsWaitTheirTurn(t *testing.T) {
	groups := make([]targets.Group, 1)
	for i := range 5000 { // loopback addresses nothing listens on
		groups[0].Targets = append(groups[0].Targets, fmt.Sprintf("127.77.%d.%d:9", i/250, i%250+1))
	}
	sd := startSDServer(t)
	sd.serve(t, groups...)
	cfg := withHTTPSD(targetsConfig(), sd.URL)
	cfg.PollInterval = time.Minute
	cfg.Targets.MaxTargets = 50
	h := startHarness(t, cfg)
	require.Eventually(t, func() bool {
		return strings.Contains(fmt.Sprint(h.host.lastErr()), "4950 discovered agent servers wait")
	}, waitFor, tick)
	assert.Equal(t, int64(50), h.metric("otelcol_openhands_targets", "state", "watched"))
	assert.Equal(t, int64(4950), h.metric("otelcol_openhands_targets", "state", "waiting"))
}

// TestREADMETargetDocumentsParse reads every ```json block of the README,
// each a service-discovery document: every target in it is watchable.
func TestREADMETargetDocumentsParse(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks := strings.Split(string(readme), "```json\n")[1:]
	require.NotEmpty(t, blocks)
	for _, block := range blocks {
		doc, _, ok := strings.Cut(block, "```")
		require.True(t, ok)
		groups, err := targets.Parse([]byte(doc), sourceLimits(SourceLimits{}.withDefaults()))
		require.NoError(t, err, doc)
		set, skipped := targets.Resolve(groups)
		assert.Empty(t, skipped, doc)
		assert.NotEmpty(t, set, doc)
	}
}

// TestRuntimeAPISource watches the running runtimes a runtime API lists,
// with each runtime's own key, and ends the sessions of one that stops.
func TestRuntimeAPISource(t *testing.T) {
	a, b, paused := startKeyedStub(t, "key-a"), startKeyedStub(t, "key-b"), startKeyedStub(t, "key-p")
	convA, convB, convP := createConversation(t, a.Server), createConversation(t, b.Server), createConversation(t, paused.Server)
	api := oh.StartRuntimeAPI(t, "runtime-api-key")
	runtimes := []oh.Runtime{
		{ID: "r-a", SessionID: "sb-a", URL: a.URL(), SessionAPIKey: a.key, Status: "running"},
		{ID: "r-b", SessionID: "sb-b", URL: b.URL(), SessionAPIKey: b.key, Status: "running"},
		{ID: "r-p", SessionID: "sb-p", URL: paused.URL(), SessionAPIKey: paused.key, Status: "paused"},
	}
	api.Set(runtimes...)
	cfg := targetsConfig()
	src := RuntimeAPIConfig{APIKey: "runtime-api-key", SourceLimits: SourceLimits{RefreshInterval: 20 * time.Millisecond}}
	src.Endpoint = api.URL
	cfg.Targets.RuntimeAPI = []RuntimeAPIConfig{src}
	h := startHarness(t, cfg)
	h.waitLive(convA, 1)
	h.waitLive(convB, 1)
	assert.Equal(t, "sb-a", h.resourceOf(convA.ID(), "sandbox_id"))
	assert.Equal(t, "r-b", h.resourceOf(convB.ID(), "runtime_id"))

	b.Close()
	api.Set(runtimes[0], runtimes[2])
	h.waitTypes(convB.ID(), "session.ended")
	assert.Empty(t, h.session(convP.ID()), "a paused runtime is not watched")
	h.validate()
}

// TestAppServerSource pages an app server's sandbox search and watches
// its RUNNING sandboxes only.
func TestAppServerSource(t *testing.T) {
	a, b := startKeyedStub(t, "key-a"), startKeyedStub(t, "key-b")
	convA, convB := createConversation(t, a.Server), createConversation(t, b.Server)
	app := oh.StartAppServer(t, "app-key")
	var sandboxes []oh.Sandbox
	for i := range 150 { // two pages, the running ones on each
		sandboxes = append(sandboxes, oh.Sandbox{ID: fmt.Sprintf("sb-%d", i), Status: "PAUSED"})
	}
	sandboxes[3] = oh.Sandbox{ID: "sb-a", UserID: "u-1", Status: "RUNNING", AgentServerURL: a.URL(), SessionAPIKey: a.key}
	sandboxes[120] = oh.Sandbox{ID: "sb-b", UserID: "u-2", Status: "RUNNING", AgentServerURL: b.URL(), SessionAPIKey: b.key}
	app.Set(sandboxes...)
	cfg := targetsConfig()
	src := AppServerConfig{SessionAPIKey: "app-key", SourceLimits: SourceLimits{RefreshInterval: 20 * time.Millisecond}}
	src.Endpoint = app.URL
	cfg.Targets.AppServer = []AppServerConfig{src}
	h := startHarness(t, cfg)
	h.waitLive(convA, 1)
	h.waitLive(convB, 1)
	assert.Equal(t, "u-2", h.resourceOf(convB.ID(), "user_id"))
	assert.Equal(t, int64(2), h.metric("otelcol_openhands_targets", "state", "watched"))
}

// TestControlPlaneRefusingOurKey: a runtime API that answers
// 401 fails every refresh; nothing is watched, the failures are counted.
func TestControlPlaneRefusingOurKey(t *testing.T) {
	a := startKeyedStub(t, "key-a")
	api := oh.StartRuntimeAPI(t, "the-real-key")
	api.Set(oh.Runtime{ID: "r-a", URL: a.URL(), SessionAPIKey: a.key, Status: "running"})
	cfg := targetsConfig()
	src := RuntimeAPIConfig{APIKey: "a-wrong-key", SourceLimits: SourceLimits{RefreshInterval: 20 * time.Millisecond}}
	src.Endpoint = api.URL
	cfg.Targets.RuntimeAPI = []RuntimeAPIConfig{src}
	h := startHarness(t, cfg)
	require.Eventually(t, func() bool {
		return h.metric("otelcol_openhands_target_refreshes", "outcome", "failed") >= 3
	}, waitFor, tick)
	assert.Zero(t, h.metric("otelcol_openhands_targets", "state", "watched"))
	assert.Empty(t, a.Requests(), "no target of a refused listing is reached")
}

// TestRekeyedTargetStartsAfresh lists a server under a new key: its
// session under the old key ends, and a new one starts under the new.
func TestRekeyedTargetStartsAfresh(t *testing.T) {
	s := oh.Start(t, oh.Config{SessionAPIKeys: []string{"old-key", "new-key"}})
	conv := createConversation(t, s)
	file := newSDFile(t, "agents.json")
	listed := func(key string) targets.Group {
		return targets.Group{Targets: []string{s.Addr()}, Labels: map[string]string{targets.LabelKey: key}}
	}
	file.write(listed("old-key"))
	h := startHarness(t, withFileSD(targetsConfig(), file.path))
	h.waitLive(conv, 1)
	file.write(listed("new-key"))
	h.waitLive(conv, 2)
	evs := h.session(conv.ID())
	assert.Equal(t, 2, count(evs, "session.started"))
	assert.Equal(t, 1, count(evs, "session.ended"))
	assert.True(t, slices.ContainsFunc(s.Requests(), func(r oh.Request) bool { return r.Header.Get("X-Session-API-Key") == "new-key" }),
		"the new key is used")
	h.validate()
}

// TestVanishedIdleTargetGoesAtOnce: a server with no open session is let
// go as soon as no source lists it, grace or not.
func TestVanishedIdleTargetGoesAtOnce(t *testing.T) {
	a := startKeyedStub(t, "key-a")
	file := newSDFile(t, "agents.json")
	file.write(a.group("red"))
	cfg := withFileSD(targetsConfig(), file.path)
	cfg.Targets.Grace = time.Hour
	h := startHarness(t, cfg)
	require.Eventually(t, func() bool { return h.metric("otelcol_openhands_targets", "state", "watched") == 1 }, waitFor, tick)
	file.write()
	require.Eventually(t, func() bool {
		return h.metric("otelcol_openhands_targets", "state", "watched")+h.metric("otelcol_openhands_targets", "state", "draining") == 0
	}, waitFor, tick)
}

// TestStaticShardsSpreadTargetConversations: two replicas given the same
// targets and shard.count 2 observe each conversation exactly once
// between them.
func TestStaticShardsSpreadTargetConversations(t *testing.T) {
	a := startKeyedStub(t, "key-a")
	var convs []*oh.Conversation
	for range 8 {
		convs = append(convs, createConversation(t, a.Server))
	}
	file := newSDFile(t, "agents.json")
	file.write(a.group("red"))
	var replicas []*harness
	for i := range 2 {
		cfg := withFileSD(targetsConfig(), file.path)
		cfg.Shard = ShardConfig{Index: ptr(i), Count: 2}
		cfg.Targets.MaxConversations = len(convs)
		replicas = append(replicas, startHarness(t, cfg))
	}
	for _, conv := range convs {
		owner := replicas[shardOf(conv.ID(), 2)]
		owner.waitLive(conv, 1)
	}
	for _, conv := range convs {
		observers := 0
		for _, h := range replicas {
			if len(h.session(conv.ID())) > 0 {
				observers++
			}
		}
		assert.Equal(t, 1, observers, "conversation %s", conv.ID())
	}
}

// TestHTTPSDIsJSONOnly: an http_sd answer is JSON, as Prometheus requires;
// YAML, whose decoder a remote source could keep busy, fails the refresh.
func TestHTTPSDIsJSONOnly(t *testing.T) {
	sd := startSDServer(t)
	cfg := withHTTPSD(targetsConfig(), sd.URL).Targets.HTTPSD[0]
	src, err := newHTTPSource(context.Background(), componenttest.NewNopHost(), componenttest.NewNopTelemetrySettings(), 0, cfg)
	require.NoError(t, err)
	sd.answer(http.StatusOK, []byte("[{targets: [a:1]}]"))
	assert.ErrorContains(t, src.refresh(context.Background(), 0).err, "not a JSON list of target groups")
	sd.answer(http.StatusOK, []byte(`[{"targets":["a:1"]}]`))
	u := src.refresh(context.Background(), 0)
	require.NoError(t, u.err)
	assert.Len(t, u.targets, 1)
}

// TestRetiredTargetLeavesNoServerUp: a killed target retired past grace
// takes its otelcol_openhands_server_up with it (its last 0 would keep
// the unreachable alert firing, and a fleet's series would only grow).
func TestRetiredTargetLeavesNoServerUp(t *testing.T) {
	a := startKeyedStub(t, "key-a")
	conv := createConversation(t, a.Server)
	file := newSDFile(t, "agents.json")
	file.write(a.group("red"))
	h := startHarness(t, withFileSD(targetsConfig(), file.path))
	h.waitLive(conv, 1)
	serverUp := func() bool {
		m, err := h.tel.GetMetric("otelcol_openhands_server_up")
		if err != nil {
			return false // no server has a series
		}
		for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
			if v, _ := dp.Attributes.Value("server"); v.AsString() == a.URL() {
				return true
			}
		}
		return false
	}
	require.Eventually(t, serverUp, waitFor, tick, "the target's server_up is set once a round answered")
	a.Close()
	file.write()
	h.waitTypes(conv.ID(), "session.ended")
	require.Eventually(t, func() bool {
		return h.metric("otelcol_openhands_targets", "state", "draining") == 0
	}, waitFor, tick)
	assert.False(t, serverUp(), "the retired target's server_up is gone")
}
