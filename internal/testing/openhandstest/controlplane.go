package openhandstest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The OpenHands control planes that list agent servers, as far as a
// receiver reads them: the runtime API's GET /list (the RemoteRuntime
// protocol) and the app server's GET /api/v1/sandboxes/search
// (openhands/app_server/sandbox/sandbox_router.py, SandboxPage).

// Runtime is one runtime a RuntimeAPI lists.
type Runtime struct {
	ID, SessionID, URL, SessionAPIKey string
	// Status is running, paused, stopped, starting or error.
	Status string
}

// RuntimeAPI is a stub runtime API on loopback.
type RuntimeAPI struct {
	*httptest.Server
	apiKey string

	mu       sync.Mutex
	runtimes []Runtime
}

// StartRuntimeAPI starts a runtime API that takes apiKey as X-API-Key,
// closed when tb ends.
func StartRuntimeAPI(tb testing.TB, apiKey string) *RuntimeAPI {
	a := &RuntimeAPI{apiKey: apiKey}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	tb.Cleanup(a.Close)
	return a
}

// SetRuntimes replaces what /list answers.
func (a *RuntimeAPI) SetRuntimes(rs ...Runtime) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.runtimes = rs
}

func (a *RuntimeAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-Key") != a.apiKey {
		writeDetail(w, http.StatusUnauthorized, "Invalid API Key")
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/list" {
		writeDetail(w, http.StatusNotFound, "Not Found")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]map[string]any, 0, len(a.runtimes))
	for _, rt := range a.runtimes {
		out = append(out, map[string]any{
			"runtime_id": rt.ID, "session_id": rt.SessionID, "url": rt.URL,
			"session_api_key": rt.SessionAPIKey, "status": rt.Status, "pod_status": rt.Status,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"runtimes": out, "total": len(out)})
}

// Sandbox is one sandbox an AppServer lists.
type Sandbox struct {
	ID, UserID string
	// Status is RUNNING, STARTING, PAUSED, ERROR or MISSING; only a
	// RUNNING sandbox shows its agent server's URL and key.
	Status                        string
	AgentServerURL, SessionAPIKey string
}

// AppServer is a stub app server's sandbox search on loopback.
type AppServer struct {
	*httptest.Server
	sessionAPIKey string

	mu        sync.Mutex
	sandboxes []Sandbox
}

// StartAppServer starts an app server that takes sessionAPIKey as
// X-Session-API-Key ("" takes any request), closed when tb ends.
func StartAppServer(tb testing.TB, sessionAPIKey string) *AppServer {
	a := &AppServer{sessionAPIKey: sessionAPIKey}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	tb.Cleanup(a.Close)
	return a
}

// SetSandboxes replaces what the search lists.
func (a *AppServer) SetSandboxes(sbs ...Sandbox) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sandboxes = sbs
}

func (a *AppServer) serve(w http.ResponseWriter, r *http.Request) {
	if a.sessionAPIKey != "" && r.Header.Get("X-Session-API-Key") != a.sessionAPIKey {
		writeDetail(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/api/v1/sandboxes/search" {
		writeDetail(w, http.StatusNotFound, "Not Found")
		return
	}
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if r.URL.Query().Get("limit") == "" {
		limit, err = 100, nil
	}
	start, perr := strconv.Atoi(r.URL.Query().Get("page_id"))
	if r.URL.Query().Get("page_id") == "" {
		start, perr = 0, nil
	}
	if err != nil || perr != nil || limit <= 0 || limit > 100 || start < 0 {
		writeDetail(w, http.StatusUnprocessableEntity, "invalid page_id or limit")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	items := []map[string]any{}
	end := min(start+limit, len(a.sandboxes))
	for _, sb := range a.sandboxes[min(start, end):end] {
		item := map[string]any{
			"id": sb.ID, "created_by_user_id": sb.UserID, "sandbox_spec_id": "ghcr.io/openhands/agent-server:stub",
			"status": sb.Status, "session_api_key": nil, "exposed_urls": nil,
			"created_at": time.Unix(0, 0).UTC().Format(time.RFC3339),
		}
		if sb.Status == "RUNNING" {
			item["session_api_key"] = sb.SessionAPIKey
			item["exposed_urls"] = []map[string]any{
				{"name": "AGENT_SERVER", "url": sb.AgentServerURL},
				{"name": "VSCODE", "url": sb.AgentServerURL + "/vscode"},
			}
		}
		items = append(items, item)
	}
	var next any
	if end < len(a.sandboxes) {
		next = strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_page_id": next})
}
