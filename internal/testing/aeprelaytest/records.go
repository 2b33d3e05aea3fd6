package aeprelaytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Binding names how an Event or command reached the relay.
type Binding string

// Bindings.
const (
	BindingPOST   Binding = "post"
	BindingSocket Binding = "socket"
	// BindingInjected is a command given to SendCommand.
	BindingInjected Binding = "injected"
)

// Record is one Event the relay admitted. Raw and Event are shared with
// the relay: read them, never modify them.
type Record struct {
	// Raw is the Event as received (compacted if it spanned lines).
	Raw   []byte
	Event *aep.Event
	// Binding and Conn say where it came from; Conn is 0 unless Binding is
	// BindingSocket.
	Binding Binding
	Conn    int
	// ReceivedAt is when the relay ingested the Event (validated, before
	// buffering and fan-out); for Events() it is the first arrival.
	ReceivedAt time.Time
}

// ViolationKind classifies a Violation.
type ViolationKind string

// Violation kinds.
const (
	// ViolationSchema: the Event failed schema.ValidateJSON or aep.Parse
	// and was refused (400 on POST, an invalid-event error frame on the
	// socket).
	ViolationSchema ViolationKind = "schema"
	// ViolationStream: stream.Checker refused the Event; the relay still
	// handled it as the reference relay would. Err wraps the stream
	// package's rule (errors.Is(v.Err, stream.ErrOrdering), …).
	ViolationStream ViolationKind = "stream"
	// ViolationProtocol: a socket party broke a wire rule (hello content,
	// a second hello, a frame that is not a JSON object, a binary frame, an
	// Event whose agent differs from its connection's hello identity). Err
	// wraps ErrProtocol.
	ViolationProtocol ViolationKind = "protocol"
)

// ErrProtocol is wrapped by every protocol violation.
var ErrProtocol = errors.New("aep wire protocol violation")

// Violation is one rule an ingested Event or frame broke.
type Violation struct {
	Kind    ViolationKind
	Binding Binding
	Conn    int
	// EventID, Type and Source identify the Event, when there is one and
	// it could be read.
	EventID string
	Type    string
	Source  string
	Err     error
}

func (v Violation) String() string {
	return fmt.Sprintf("%s violation (%s conn %d, %s %s): %v", v.Kind, v.Binding, v.Conn, v.Type, v.EventID, v.Err)
}

// Hello is one hello a socket party sent.
type Hello struct {
	Conn     int
	Role     string
	Versions []string
	Agent    string
	Instance string
	// Accepts is capabilities.control.accepts (nil when not declared): the
	// command types the relay may route to this connection.
	Accepts []string
	// AckWindowMS is capabilities.control.ack_window_ms, 0 when absent.
	AckWindowMS int64
	Raw         []byte
}

// Frame is one non-Event frame a socket party sent (hello included).
type Frame struct {
	Conn int
	Type string
	Raw  []byte
}

// Command is one routing decision.
type Command struct {
	ID      string
	Type    string
	Session string
	Binding Binding
	// From is the sender's connection (0 for POST and SendCommand).
	From int
	// To is the claimant it was forwarded to, 0 when refused.
	To int
	// Refusal is the relay-behalf error frame, nil when routed.
	Refusal *ErrorFrame
	Raw     []byte
}

// ErrorFrame is an AEP `error` frame (AEP-0003 §3.5, §6.5; AEP-0004 §4).
type ErrorFrame struct {
	Type string `json:"type"`
	// ID is the request it answers (subscribe, roster).
	ID string `json:"id,omitempty"`
	// Cause is the refused Event's id: a command refused on the relay's
	// behalf, or an Event refused as invalid.
	Cause    string   `json:"cause,omitempty"`
	Code     string   `json:"code"`
	Detail   string   `json:"detail,omitempty"`
	Versions []string `json:"versions,omitempty"`
}

func (f *ErrorFrame) bytes() []byte {
	raw, err := json.Marshal(f)
	if err != nil {
		// Only strings and string slices: Marshal cannot fail.
		return []byte(`{"type":"error","code":"internal"}`)
	}
	return raw
}

// Conn describes one live socket connection.
type Conn struct {
	ID int
	// Role, Agent, Instance and Accepts come from its hello (empty before).
	Role     string
	Agent    string
	Instance string
	Accepts  []string
	// Claims are the sessions it claims for command routing, sorted.
	Claims []string
	// Subscriptions are its subscription ids, sorted.
	Subscriptions []string
}

// SessionRef names one buffered session.
type SessionRef struct {
	Source  string
	Session string
}
