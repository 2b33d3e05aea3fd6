// Package fakellm is an OpenAI-compatible chat model for live tests: it
// serves POST /v1/chat/completions (plain JSON or SSE-streamed) and
// GET /v1/models on loopback, and plays a scripted reply per conversation.
// Every completion reports usage, so the agent server's stats carry real
// figures.
package fakellm

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Model is the model id the fake serves.
const Model = "fake-model"

// marker names a conversation's script in its first user message.
var marker = regexp.MustCompile(`\[\[script:([a-z0-9_-]+)\]\]`)

// Server is a running fake model.
type Server struct {
	scripts map[string]Script
	srv     *http.Server
	ln      net.Listener

	mu    sync.Mutex
	calls map[string]int // completions served per script
}

// Start serves scripts on a random loopback port.
func Start(scripts map[string]Script) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake llm listen: %w", err)
	}
	s := &Server{scripts: scripts, ln: ln, calls: make(map[string]int)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleCompletion)
	mux.HandleFunc("GET /v1/models", handleModels)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// BaseURL is what an OpenAI client takes as base_url.
func (s *Server) BaseURL() string { return "http://" + s.ln.Addr().String() + "/v1" }

// Calls is how many completions a script has served.
func (s *Server) Calls(script string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[script]
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

func handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data":   []any{map[string]any{"id": Model, "object": "model", "owned_by": "fakellm"}},
	})
}

// request is the part of a chat completion request the fake reads.
type request struct {
	Messages []message `json:"messages"`
	Stream   bool      `json:"stream"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text flattens string or content-part content.
func (m message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// handleCompletion answers the step of the conversation's script that its
// history has reached: the n-th completion of a conversation carries n
// assistant messages before it.
func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request) {
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "decode request: "+err.Error())
		return
	}
	name, step := "", 0
	prompt := 0
	for _, m := range req.Messages {
		text := m.text()
		prompt += tokens(text)
		switch m.Role {
		case "user":
			if name == "" {
				if sm := marker.FindStringSubmatch(text); sm != nil {
					name = sm[1]
				}
			}
		case "assistant":
			step++
		}
	}
	script, ok := s.scripts[name]
	if !ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("no script named %q in the first user message", name))
		return
	}
	s.mu.Lock()
	s.calls[name]++
	s.mu.Unlock()
	// Past its end a script finishes, so that no conversation loops.
	st := Step{Tool: &ToolCall{Name: "finish", Arguments: map[string]any{"message": "Done."}}}
	if step < len(script.Steps) {
		st = script.Steps[step]
	}
	if st.Error != nil {
		writeError(w, st.Error.Status, st.Error.Message)
		return
	}
	reply := newReply(name, step, st, prompt)
	if req.Stream {
		reply.stream(w)
		return
	}
	writeJSON(w, http.StatusOK, reply.completion())
}

// tokens is the fake's tokenizer: four characters a token, at least one.
func tokens(s string) int { return max(1, len(s)/4) }

// reply is one scripted completion.
type reply struct {
	id        string
	text      string
	toolCall  map[string]any // nil for a plain reply
	usage     map[string]any
	finish    string
	createdAt int64
}

func newReply(script string, step int, st Step, prompt int) reply {
	r := reply{
		id:        fmt.Sprintf("chatcmpl-%s-%d", script, step),
		text:      st.Text,
		finish:    "stop",
		createdAt: time.Now().Unix(),
	}
	completion := tokens(st.Text)
	if st.Tool != nil {
		args, _ := json.Marshal(st.Tool.Arguments)
		r.toolCall = map[string]any{
			"id":       fmt.Sprintf("call_%s_%d", script, step),
			"type":     "function",
			"function": map[string]any{"name": st.Tool.Name, "arguments": string(args)},
		}
		r.finish = "tool_calls"
		completion = tokens(string(args))
	}
	r.usage = map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
	return r
}

func (r reply) message() map[string]any {
	m := map[string]any{"role": "assistant", "content": r.text}
	if r.toolCall != nil {
		m["content"] = nil
		m["tool_calls"] = []any{r.toolCall}
	}
	return m
}

func (r reply) completion() map[string]any {
	return map[string]any{
		"id": r.id, "object": "chat.completion", "created": r.createdAt, "model": Model,
		"choices": []any{map[string]any{"index": 0, "message": r.message(), "finish_reason": r.finish}},
		"usage":   r.usage,
	}
}

// stream writes the reply as SSE chunks: the text in word-sized deltas (a
// tool call in one delta), then the finish reason with the usage, then
// [DONE].
func (r reply) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any, usage map[string]any) {
		c := map[string]any{
			"id": r.id, "object": "chat.completion.chunk", "created": r.createdAt, "model": Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
		if usage != nil {
			c["usage"] = usage
		}
		raw, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", raw)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if r.toolCall != nil {
		call := map[string]any{"index": 0}
		for k, v := range r.toolCall {
			call[k] = v
		}
		chunk(map[string]any{"tool_calls": []any{call}}, nil, nil)
	}
	for _, word := range splitWords(r.text) {
		chunk(map[string]any{"content": word}, nil, nil)
	}
	chunk(map[string]any{}, r.finish, r.usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// splitWords cuts s after each space, keeping every character.
func splitWords(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "fake_llm_error", "code": status}})
}
