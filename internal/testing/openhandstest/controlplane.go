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

// listing is a stub control plane on loopback: the items it lists, which
// a test replaces, behind a header check.
type listing[T any] struct {
	*httptest.Server
	header, key string // the request must carry key in header ("" takes any)

	mu    sync.Mutex
	items []T
}

func startListing[T any](tb testing.TB, header, key string, serve func(w http.ResponseWriter, r *http.Request, items []T)) *listing[T] {
	l := &listing[T]{header: header, key: key}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.key != "" && r.Header.Get(l.header) != l.key {
			writeDetail(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		l.mu.Lock()
		items := append([]T(nil), l.items...)
		l.mu.Unlock()
		serve(w, r, items)
	}))
	tb.Cleanup(l.Close)
	return l
}

// Set replaces what the listing answers.
func (l *listing[T]) Set(items ...T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = items
}

// RuntimeAPI is a stub runtime API: GET /list with X-API-Key.
type RuntimeAPI struct{ *listing[Runtime] }

// StartRuntimeAPI starts a runtime API that takes apiKey as X-API-Key,
// closed when tb ends.
func StartRuntimeAPI(tb testing.TB, apiKey string) RuntimeAPI {
	return RuntimeAPI{startListing(tb, "X-API-Key", apiKey, serveRuntimes)}
}

func serveRuntimes(w http.ResponseWriter, r *http.Request, runtimes []Runtime) {
	if r.Method != http.MethodGet || r.URL.Path != "/list" {
		writeDetail(w, http.StatusNotFound, "Not Found")
		return
	}
	out := make([]map[string]any, 0, len(runtimes))
	for _, rt := range runtimes {
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

// AppServer is a stub app server's GET /api/v1/sandboxes/search.
type AppServer struct{ *listing[Sandbox] }

// StartAppServer starts an app server that takes sessionAPIKey as
// X-Session-API-Key ("" takes any request), closed when tb ends.
func StartAppServer(tb testing.TB, sessionAPIKey string) AppServer {
	return AppServer{startListing(tb, "X-Session-API-Key", sessionAPIKey, serveSandboxes)}
}

func serveSandboxes(w http.ResponseWriter, r *http.Request, sandboxes []Sandbox) {
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
	items := []map[string]any{}
	end := min(start+limit, len(sandboxes))
	for _, sb := range sandboxes[min(start, end):end] {
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
	if end < len(sandboxes) {
		next = strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_page_id": next})
}
