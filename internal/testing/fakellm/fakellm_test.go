package fakellm

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func start(t *testing.T) *Server {
	t.Helper()
	s := Script{Steps: []Step{
		{Tool: &ToolCall{Name: "terminal", Arguments: map[string]any{"command": "echo {n}"}}, Repeat: 2},
		{Text: "all done here"},
		{Error: &Failure{Status: 500, Message: "boom"}},
	}}
	require.NoError(t, s.expand())
	srv, err := Start(map[string]Script{"demo": s})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// post asks for a completion after `assistants` earlier turns.
func post(t *testing.T, srv *Server, assistants int, stream bool) *http.Response {
	t.Helper()
	msgs := []any{
		map[string]any{"role": "system", "content": "you are a test"},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "go [[script:demo]]"}}},
	}
	for range assistants {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "x"})
	}
	body, err := json.Marshal(map[string]any{"model": Model, "messages": msgs, "stream": stream})
	require.NoError(t, err)
	resp, err := http.Post(srv.BaseURL()+"/chat/completions", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestScriptedCompletions(t *testing.T) {
	srv := start(t)
	var got struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	resp := post(t, srv, 1, false)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Len(t, got.Choices, 1)
	assert.Equal(t, "tool_calls", got.Choices[0].FinishReason)
	assert.Equal(t, "terminal", got.Choices[0].Message.ToolCalls[0].Function.Name)
	assert.JSONEq(t, `{"command":"echo 2"}`, got.Choices[0].Message.ToolCalls[0].Function.Arguments, "repeat numbers the command")
	assert.Positive(t, got.Usage.PromptTokens)
	assert.Positive(t, got.Usage.CompletionTokens)

	resp = post(t, srv, 3, false)
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, "the scripted LLM error")
	assert.Equal(t, 2, srv.Calls("demo"))
}

func TestStreamedReply(t *testing.T) {
	srv := start(t)
	resp := post(t, srv, 2, true)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var text strings.Builder
	usage, done := false, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage map[string]int `json:"usage"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c))
		text.WriteString(c.Choices[0].Delta.Content)
		usage = usage || c.Usage["completion_tokens"] > 0
	}
	assert.True(t, done)
	assert.True(t, usage, "the last chunk carries usage")
	assert.Equal(t, "all done here", text.String())
}

func TestUnknownScriptIsRefused(t *testing.T) {
	srv := start(t)
	resp, err := http.Post(srv.BaseURL()+"/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"no marker"}]}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
