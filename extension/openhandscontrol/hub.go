package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The gate sits between two components that find it by its id among the
// host's extensions (as splunkhecreceiver finds ackextension): the
// aeprelay exporter hands it commands (its control key; the gate
// implements the exporter's ControlHandler), and the openhands receiver
// registers the conversations it observes (its control key; Register).

// Registrar is what the receiver looks the extension up as.
type Registrar interface {
	// Register adds the conversations an observer holds to those commands
	// may address, and returns how the observer makes each one's control
	// state (whether the gate is on stays inside it); unregister removes
	// the observer again (its Shutdown). An open gate warns here about
	// every server of the observer its writes would reach over plaintext.
	Register(o Observer) (newNotes NewNotesFunc, unregister func())
}

// NewNotesFunc returns the control state of one conversation, read
// through view and resuming from restored (State's zero value: nothing
// remembered).
type NewNotesFunc func(view View, restored State) *Notes

// Observer is a receiver's set of observed conversations.
type Observer interface {
	// Sessions returns every observed conversation whose AEP session id is
	// id, in the order they were first observed: one per agent server that
	// lists the id. More than one is a conflict the gate refuses to guess
	// through.
	Sessions(id string) []Session
	// Servers are the agent servers the observer watches, which an open
	// gate writes to.
	Servers() []Server
}

// Session is one observed conversation, as the gate drives it.
type Session interface {
	// Server is the agent server the conversation lives on.
	Server() Server
	// Control runs fn under the conversation's lock, the one that orders
	// its mapping and emission, with its control state, and emits the
	// events fn returns through the session's sequencer before the lock is
	// released: acks and outcomes get their (epoch, seq) where every other
	// event of the session does. fn must not block. The session logs what
	// it fails to emit.
	Control(ctx context.Context, fn func(n *Notes) []*aep.Event)
	// Resend re-emits an already sequenced event unchanged, at its
	// recorded position: a recorded ack answering a redelivered command.
	Resend(ctx context.Context, ev *aep.Event)
	// Save stores the conversation's control state (Notes.State) with its
	// durable state now, when the receiver has storage (else it does
	// nothing). The gate saves a command's note before its write, so that
	// a restart knows the write may have been made.
	Save(ctx context.Context) error
}

// Server is where a conversation lives: its REST base and the client and
// session key the receiver observes it with.
type Server struct {
	// Name labels the server in logs and metrics.
	Name string
	// Base is the server's base URL (the receiver's servers[].endpoint).
	Base *url.URL
	// Key is sent as X-Session-API-Key; empty sends none.
	Key configopaque.String
	// Client is the receiver's HTTP client for the server (TLS, headers,
	// timeout).
	Client *http.Client
}

// View is what the gate reads from and builds through one conversation's
// mapping state (the receiver's mapper implements it). It is used under
// the conversation's lock only.
type View interface {
	// Status is the last-observed execution_status, "" before the first.
	Status() string
	// Attention is the id of the live attention.requested, "" if none.
	Attention() string
	// NewEvent returns an envelope of the session (source, agent, open
	// run, severity, capture level) with an id derived from key.
	NewEvent(typ string, at time.Time, key string) *aep.Event
	// Redacted returns s as a field annotated redacted may carry it in out.
	Redacted(out *aep.Event, s string) (string, bool)
}
