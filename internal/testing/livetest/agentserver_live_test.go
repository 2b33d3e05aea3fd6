//go:build live

package livetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
)

// agentServer is the real openhands-agent-server, a child process in its
// own process group with private state and working directories.
type agentServer struct {
	tb     testing.TB
	python string
	dir    string // state, workspace, home and log live here
	url    string
	proc   *childproc.Process // nil when stopped
	client *http.Client
	env    []string // more of the server's environment, e.g. its webhooks
}

// startAgentServer starts the server and waits until /ready answers. It is
// stopped when the test ends, whatever happens.
func startAgentServer(tb testing.TB, python string, env ...string) *agentServer {
	tb.Helper()
	s := &agentServer{tb: tb, python: python, env: env, dir: tb.TempDir(), client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}}
	for _, d := range []string{"conversations", "bash_events", "workspace", "home", "cwd"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(s.stop)
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
	return s
}

func (s *agentServer) start() error {
	addr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.python, "-m", "openhands.agent_server", "--host", "127.0.0.1", "--port", port)
	cmd.Dir = filepath.Join(s.dir, "cwd")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(s.dir, "home"),
		"TZ=UTC",
		"OH_SESSION_API_KEYS_0=" + SessionKey,
		"OH_CONVERSATIONS_PATH=" + filepath.Join(s.dir, "conversations"),
		"OH_BASH_EVENTS_DIR=" + filepath.Join(s.dir, "bash_events"),
		"OH_WORKSPACE_PATH=" + filepath.Join(s.dir, "workspace"),
		"OH_ENABLE_VSCODE=false", "OH_PRELOAD_TOOLS=false", "OH_ENABLE_BROWSER=false",
		"OH_MAX_CONCURRENT_RUNS=16",
		"LITELLM_LOCAL_MODEL_COST_MAP=True",
	}
	cmd.Env = append(cmd.Env, s.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	s.proc, err = childproc.Start(cmd, childproc.InGroup())
	logf.Close() // the server has its own descriptor
	if err != nil {
		return fmt.Errorf("start agent server: %w", err)
	}
	s.url = "http://" + addr
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("agent server exited while starting; log:\n%s", s.logTail())
		default:
		}
		if resp, err := s.client.Get(s.url + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("agent server not ready after 90s; log:\n%s", s.logTail())
}

// stop ends the process group, tool subprocesses included: SIGTERM, then
// SIGKILL after 20 s.
func (s *agentServer) stop() {
	if s.proc == nil {
		return
	}
	if s.proc.Stop(20 * time.Second) {
		s.tb.Logf("agent server ignored SIGTERM for 20s; killed it")
	}
	s.proc = nil
}

// restart stops the server and starts it again on the same state.
func (s *agentServer) restart() error {
	s.stop()
	return s.start()
}

func (s *agentServer) logTail() string {
	raw, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return tail(string(raw), 8000)
}

// call makes one REST call with the session key and decodes a JSON answer
// into out (when out is not nil).
func (s *agentServer) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Session-API-Key", SessionKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// conversationSpec is what the test asks the server to create.
type conversationSpec struct {
	script  string
	confirm bool // AlwaysConfirm
	stream  bool
	tools   []string // more tools by name, besides the terminal
}

func (s *agentServer) createConversation(ctx context.Context, llmURL string, spec conversationSpec) (string, error) {
	policy := "NeverConfirm"
	if spec.confirm {
		policy = "AlwaysConfirm"
	}
	work := filepath.Join(s.dir, "workspace", spec.script)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	tools := []any{map[string]any{"name": "terminal", "params": map[string]any{"terminal_type": "subprocess"}}}
	for _, name := range spec.tools {
		tools = append(tools, map[string]any{"name": name})
	}
	body := map[string]any{
		"agent": map[string]any{
			"kind": "Agent",
			"llm": map[string]any{
				"model": "openai/fake-model", "base_url": llmURL, "api_key": "x", "api_mode": "chat",
				"stream": spec.stream, "num_retries": 0, "usage_id": "agent",
			},
			"tools": tools,
		},
		"workspace":           map[string]any{"working_dir": work},
		"confirmation_policy": map[string]any{"kind": policy},
		"autotitle":           false,
		"max_iterations":      200,
	}
	var info struct {
		ID string `json:"id"`
	}
	if _, err := s.call(ctx, http.MethodPost, "/api/conversations", body, &info); err != nil {
		return "", err
	}
	if info.ID == "" {
		return "", errors.New("create conversation: no id in the answer")
	}
	return info.ID, nil
}

func (s *agentServer) sendMessage(ctx context.Context, id, text string) error {
	_, err := s.call(ctx, http.MethodPost, "/api/conversations/"+id+"/events", map[string]any{
		"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}, "run": true,
	}, nil)
	return err
}

func (s *agentServer) status(ctx context.Context, id string) (string, error) {
	var info struct {
		Status string `json:"execution_status"`
	}
	_, err := s.call(ctx, http.MethodGet, "/api/conversations/"+id, nil, &info)
	return info.Status, err
}

// events pages the conversation's persisted events in log order.
func (s *agentServer) events(ctx context.Context, id string) ([]map[string]any, error) {
	var all []map[string]any
	q := url.Values{"sort_order": {"TIMESTAMP"}, "limit": {"100"}}
	for {
		var page struct {
			Items  []map[string]any `json:"items"`
			NextID *string          `json:"next_page_id"`
		}
		if _, err := s.call(ctx, http.MethodGet, "/api/conversations/"+id+"/events/search?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextID == nil || *page.NextID == "" {
			return all, nil
		}
		q.Set("page_id", *page.NextID)
	}
}
