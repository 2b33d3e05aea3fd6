package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// StateVersion is the version of the persisted values below; a value of
// another version is not read (the session or agent starts afresh).
const StateVersion = 1

// Bounds on what one session keeps.
const (
	// seenEvents is how many event keys a session remembers, so that a
	// redelivered or retried event is not counted twice.
	seenEvents = 64
	// recentTools is how many tool requests the loop rule looks back on.
	recentTools = 64
	// openToolsMax bounds the open tool calls tracked per session.
	openToolsMax = 64
	// MaxRepeatedTool is the largest repeated_tool the window can judge.
	MaxRepeatedTool = recentTools
)

// SessionKey names a session: AEP session ids are the agent's.
type SessionKey struct {
	Agent, Session string
}

// SessionState is everything the engine knows of one session, persisted
// as one value: totals, the open run, the loop and stuck rules' memory,
// the breaches fired and not yet re-armed, and the next position of the
// engine's own stream of the session.
type SessionState struct {
	Version int    `json:"v"`
	Agent   string `json:"agent"`
	Session string `json:"session"`

	Epoch int64 `json:"epoch"`
	Seq   int64 `json:"seq"`

	CostUSD     float64 `json:"cost_usd,omitempty"`
	Tokens      float64 `json:"tokens,omitempty"`
	WallSeconds float64 `json:"wall_s,omitempty"`

	// RunStart is when the open run started (arrival time); nil when no
	// run is open.
	RunStart  *time.Time `json:"run_start,omitempty"`
	LastEvent time.Time  `json:"last_event"`
	LastID    string     `json:"last_id,omitempty"`
	// OpenTools are the open tool calls, call id → tool name.
	OpenTools map[string]string `json:"open_tools,omitempty"`
	// Tools are the last tool requests: tool and arguments digest, hashed.
	Tools       []ToolUse `json:"tools,omitempty"`
	ErrorSig    string    `json:"error_sig,omitempty"`
	ErrorStreak int       `json:"error_streak,omitempty"`

	// Fired holds the breaches fired and not re-armed, by fireKey.
	Fired map[string]bool `json:"fired,omitempty"`
	// Seen are the keys of the last events counted, oldest first.
	Seen []string `json:"seen,omitempty"`
	// Unsent are the breaches fired whose events the next consumer has
	// not been seen to take: stored with the breach, they are sent again
	// after a restart (the same events, which consumers dedupe), so a
	// crash between the write and the hand-off loses no breach.
	Unsent []Breach `json:"unsent,omitempty"`
}

// ToolUse is one tool request the loop rule remembers.
type ToolUse struct {
	Key string    `json:"k"`
	At  time.Time `json:"at"`
}

// AgentState is one agent's usage over the rolling window, in buckets,
// and the agent budget's breaches fired and not re-armed.
type AgentState struct {
	Version int             `json:"v"`
	Agent   string          `json:"agent"`
	Buckets []Bucket        `json:"buckets,omitempty"`
	Fired   map[string]bool `json:"fired,omitempty"`
}

// Bucket is the usage that arrived in [Start, Start+width).
type Bucket struct {
	Start       time.Time `json:"start"`
	CostUSD     float64   `json:"cost_usd,omitempty"`
	Tokens      float64   `json:"tokens,omitempty"`
	WallSeconds float64   `json:"wall_s,omitempty"`
}

// ErrVersion: a stored value is not of StateVersion.
var ErrVersion = errors.New("policy: stored state is not of a known version")

// Encode renders a state for storage.
func Encode(v any) ([]byte, error) { return json.Marshal(v) }

// DecodeSession reads a stored session state.
func DecodeSession(raw []byte) (*SessionState, error) {
	var st SessionState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	if st.Version != StateVersion || st.Seq < 0 {
		return nil, ErrVersion
	}
	return &st, nil
}

// DecodeAgent reads a stored agent state.
func DecodeAgent(raw []byte) (*AgentState, error) {
	var st AgentState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	if st.Version != StateVersion {
		return nil, ErrVersion
	}
	return &st, nil
}

// clone deep-copies a state through its encoding.
func clone[T any](v *T) *T {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // the states are plain data: they always encode
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return &out
}

// shortHash keeps a key's identity in 16 hex characters, whatever its
// length: what a session remembers of event ids and tool digests.
func shortHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
