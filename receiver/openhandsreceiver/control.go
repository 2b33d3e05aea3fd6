package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// The receiver's side of the control gate (extension/openhandscontrol):
// with a control key it registers its conversations with the extension,
// which drives their sessions through the methods below and makes each
// session's control notes (the NewNotesFunc it returns). Every ack and
// outcome is emitted under the session's lock by its own emitter, so
// (epoch, seq) stays the receiver's alone, and the gate's pending notes
// see status flips exactly where the mapper applies them.

// findControl looks the control extension up among the host's extensions.
func findControl(id component.ID, extensions map[component.ID]component.Component) (openhandscontrol.Registrar, error) {
	ext, ok := extensions[id]
	if !ok {
		return nil, fmt.Errorf("control: extension %q is not configured in service::extensions", id)
	}
	reg, ok := ext.(openhandscontrol.Registrar)
	if !ok {
		return nil, fmt.Errorf("control: extension %q is not an openhandscontrol extension", id)
	}
	return reg, nil
}

// sessionIndex finds observed conversations by their AEP session id, for
// the gate; the discovery goroutines add and remove them. It holds one
// entry per (server, conversation): two agent servers listing the same id
// are two claims, which the gate refuses to choose between, and removing
// one never hides the other.
type sessionIndex struct {
	servers []openhandscontrol.Server // set before the gate is given the index

	mu       sync.Mutex
	sessions map[string][]*session // by id, in the order first observed
}

func newSessionIndex() *sessionIndex {
	return &sessionIndex{sessions: make(map[string][]*session)}
}

// add enters s, replacing the entry of the same server and id.
func (x *sessionIndex) add(s *session) {
	x.mu.Lock()
	defer x.mu.Unlock()
	claims := x.sessions[s.id]
	if i := slices.IndexFunc(claims, func(o *session) bool { return o.server == s.server }); i >= 0 {
		claims[i] = s
		return
	}
	x.sessions[s.id] = append(claims, s)
}

func (x *sessionIndex) remove(s *session) {
	x.mu.Lock()
	defer x.mu.Unlock()
	claims := slices.DeleteFunc(x.sessions[s.id], func(o *session) bool { return o == s })
	if len(claims) == 0 {
		delete(x.sessions, s.id)
		return
	}
	x.sessions[s.id] = claims
}

// Sessions implements openhandscontrol.Observer.
func (x *sessionIndex) Sessions(id string) []openhandscontrol.Session {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]openhandscontrol.Session, 0, len(x.sessions[id]))
	for _, s := range x.sessions[id] {
		out = append(out, s)
	}
	return out
}

// Servers implements openhandscontrol.Observer.
func (x *sessionIndex) Servers() []openhandscontrol.Server { return x.servers }

// control is the server as the gate writes to it.
func (api *serverClient) control() openhandscontrol.Server {
	return openhandscontrol.Server{Name: api.name, Base: api.base, Key: api.key, Client: api.client}
}

// userText is the text of a user message (its text parts, joined), which
// the gate matches against a pending send_input; false for any other
// event.
func userText(ev mapping.Event) (string, bool) {
	if ev.Kind() != "MessageEvent" || ev.Source() != "user" {
		return "", false
	}
	msg, _ := ev.Fields["llm_message"].(map[string]any)
	parts, _ := msg["content"].([]any)
	var text strings.Builder
	for _, p := range parts {
		if part, _ := p.(map[string]any); part["type"] == "text" {
			s, _ := part["text"].(string)
			text.WriteString(s)
		}
	}
	return text.String(), true
}
