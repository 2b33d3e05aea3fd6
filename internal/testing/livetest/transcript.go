package livetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Transcript is what crossed one Front: every REST exchange and every
// socket the receiver opened, in order.
type Transcript struct {
	// Conversations and Deleted fold the receiver's many conversation
	// searches (see Compact): each conversation's last info, and the ids
	// the last search no longer listed.
	Conversations []json.RawMessage `json:"conversations,omitempty"`
	Deleted       []string          `json:"deleted,omitempty"`
	REST          []Exchange        `json:"rest"`
	Sockets       []Socket          `json:"sockets"`
}

// searchPath is the conversation search the receiver polls.
const searchPath = "/api/conversations/search"

// Compact returns t with its conversation searches folded into
// Conversations and Deleted: a poll every few hundred milliseconds would
// otherwise make most of a recording, and only the last answer about each
// conversation shapes what the receiver emits.
func (t *Transcript) Compact() *Transcript {
	out := &Transcript{Conversations: slices.Clone(t.Conversations), Deleted: slices.Clone(t.Deleted), Sockets: t.Sockets}
	pos := map[string]int{}
	for i, info := range out.Conversations {
		pos[conversationID(info)] = i
	}
	var last map[string]bool
	for _, ex := range t.REST {
		if ex.Path != searchPath {
			out.REST = append(out.REST, ex)
			continue
		}
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		if ex.Status != http.StatusOK || json.Unmarshal(ex.Body, &page) != nil {
			continue
		}
		last = map[string]bool{}
		for _, info := range page.Items {
			id := conversationID(info)
			last[id] = true
			if i, ok := pos[id]; ok {
				out.Conversations[i] = info
				continue
			}
			pos[id] = len(out.Conversations)
			out.Conversations = append(out.Conversations, info)
		}
	}
	if last != nil {
		out.Deleted = nil
		for id := range pos {
			if !last[id] {
				out.Deleted = append(out.Deleted, id)
			}
		}
		slices.Sort(out.Deleted)
	}
	return out
}

func conversationID(info json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(info, &v)
	return v.ID
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

// conversationOf is the id of the conversation a socket or REST path names
// (/sockets/session/{id}, /api/conversations/{id}/...), "" for none.
func conversationOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "sockets":
		return parts[2]
	case len(parts) >= 3 && parts[0] == "api" && parts[1] == "conversations" && parts[2] != "search" && parts[2] != "count":
		return parts[2]
	}
	return ""
}

// Save writes t, compacted, as gzipped JSON: the frames repeat whole
// events, and compress tenfold.
func (t *Transcript) Save(path string) error {
	raw, err := json.Marshal(t.Compact())
	if err != nil {
		return fmt.Errorf("encode transcript: %w", err)
	}
	return writeGzip(path, raw)
}

// LoadTranscript reads a Transcript Save wrote.
func LoadTranscript(path string) (*Transcript, error) {
	raw, err := readGzip(path)
	if err != nil {
		return nil, err
	}
	var t Transcript
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("transcript %s: %w", path, err)
	}
	return &t, nil
}
