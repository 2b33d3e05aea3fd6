package livetest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Transcript is what crossed one Front: every REST exchange and every
// socket the receiver opened, in order.
type Transcript struct {
	REST    []Exchange `json:"rest"`
	Sockets []Socket   `json:"sockets"`
}

// Exchange is one REST request and the answer it got.
type Exchange struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Query  string          `json:"query,omitempty"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body,omitempty"` // JSON answers only
}

// Socket is one upgraded WebSocket: the frames each side sent, in order,
// and how it closed.
type Socket struct {
	Path         string            `json:"path"`
	Query        string            `json:"query,omitempty"`
	FromServer   []json.RawMessage `json:"from_server"`
	FromReceiver []json.RawMessage `json:"from_receiver"`
	// Close is the close frame the server sent; nil when the receiver or
	// the end of the test closed the socket.
	Close *Close `json:"close,omitempty"`
}

// Close is a WebSocket close frame.
type Close struct {
	Code int    `json:"code"`
	Text string `json:"text,omitempty"`
}

// Conversation is the id of the conversation a socket or REST path names
// (/sockets/session/{id}, /api/conversations/{id}/...), "" for none.
func Conversation(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "sockets":
		return parts[2]
	case len(parts) >= 3 && parts[0] == "api" && parts[1] == "conversations" && parts[2] != "search" && parts[2] != "count":
		return parts[2]
	}
	return ""
}

// Save writes t as JSON.
func (t *Transcript) Save(path string) error {
	raw, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode transcript: %w", err)
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

// LoadTranscript reads a saved Transcript.
func LoadTranscript(path string) (*Transcript, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t Transcript
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("transcript %s: %w", path, err)
	}
	return &t, nil
}
