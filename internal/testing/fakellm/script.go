package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Script is what the fake model answers in one conversation: its n-th
// completion plays Steps[n] (after Repeat expansion). A conversation asks
// for a script by naming it in its first user message as [[script:NAME]].
type Script struct {
	Steps []Step `json:"steps"`
}

// Step is one completion. Exactly one of Text, Tool and Error is set.
type Step struct {
	// Text is a plain assistant reply (no tool call): the agent's turn ends.
	Text string `json:"text,omitempty"`
	// Tool is a tool call: terminal, think or finish, with its arguments.
	Tool *ToolCall `json:"tool,omitempty"`
	// Error answers with this HTTP status and an OpenAI-shaped error body.
	Error *Failure `json:"error,omitempty"`
	// Repeat plays the step this many times (default 1); {n} in a terminal
	// command is replaced by the 1-based repetition.
	Repeat int `json:"repeat,omitempty"`
}

// ToolCall is one function call the model makes.
type ToolCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// Failure is a scripted LLM error.
type Failure struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
}

// LoadScripts reads every *.json file of dir as a Script named after the
// file (tools.json is "tools").
func LoadScripts(dir string) (map[string]Script, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no *.json scripts in %s", dir)
	}
	out := make(map[string]Script, len(paths))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read script: %w", err)
		}
		var s Script
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("script %s: %w", p, err)
		}
		if err := s.expand(); err != nil {
			return nil, fmt.Errorf("script %s: %w", p, err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = s
	}
	return out, nil
}

// expand checks each step and unrolls Repeat.
func (s *Script) expand() error {
	var steps []Step
	for i, st := range s.Steps {
		set := 0
		for _, ok := range []bool{st.Text != "", st.Tool != nil, st.Error != nil} {
			if ok {
				set++
			}
		}
		if set != 1 {
			return fmt.Errorf("steps[%d]: exactly one of text, tool and error must be set", i)
		}
		if st.Error != nil && st.Error.Status < 400 {
			return fmt.Errorf("steps[%d].error.status: must be an HTTP error status", i)
		}
		n := max(st.Repeat, 1)
		for r := 1; r <= n; r++ {
			steps = append(steps, st.repetition(r))
		}
	}
	if len(steps) == 0 {
		return errors.New("steps: at least one step is required")
	}
	s.Steps = steps
	return nil
}

func (st Step) repetition(r int) Step {
	st.Repeat = 0
	if st.Tool == nil {
		return st
	}
	args := make(map[string]any, len(st.Tool.Arguments))
	for k, v := range st.Tool.Arguments {
		if s, ok := v.(string); ok {
			v = strings.ReplaceAll(s, "{n}", fmt.Sprint(r))
		}
		args[k] = v
	}
	st.Tool = &ToolCall{Name: st.Tool.Name, Arguments: args}
	return st
}
