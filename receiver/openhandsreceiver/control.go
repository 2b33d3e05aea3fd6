package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// The receiver's side of the control gate (extension/openhandscontrol):
// with a control key it registers its conversations with the extension,
// which drives them through the three methods below. Every ack and
// outcome is emitted under the conversation's lock by its own emitter, so
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
	mu    sync.Mutex
	convs map[string][]*conversation // by id, in the order first observed
}

func newSessionIndex() *sessionIndex {
	return &sessionIndex{convs: make(map[string][]*conversation)}
}

// add enters c, replacing the entry of the same server and id.
func (x *sessionIndex) add(c *conversation) {
	x.mu.Lock()
	defer x.mu.Unlock()
	claims := x.convs[c.id]
	if i := slices.IndexFunc(claims, func(o *conversation) bool { return o.watch == c.watch }); i >= 0 {
		claims[i] = c
		return
	}
	x.convs[c.id] = append(claims, c)
}

func (x *sessionIndex) remove(c *conversation) {
	x.mu.Lock()
	defer x.mu.Unlock()
	claims := slices.DeleteFunc(x.convs[c.id], func(o *conversation) bool { return o == c })
	if len(claims) == 0 {
		delete(x.convs, c.id)
		return
	}
	x.convs[c.id] = claims
}

// Sessions implements openhandscontrol.Observer.
func (x *sessionIndex) Sessions(id string) []openhandscontrol.Session {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]openhandscontrol.Session, 0, len(x.convs[id]))
	for _, c := range x.convs[id] {
		out = append(out, c)
	}
	return out
}

var _ openhandscontrol.Session = (*conversation)(nil)

// Server implements openhandscontrol.Session: the REST base, key and
// client the receiver observes the conversation with.
func (c *conversation) Server() openhandscontrol.Server {
	api := c.watch.api
	return openhandscontrol.Server{Name: api.name, Base: api.base, Key: api.key, Client: api.client}
}

// Control implements openhandscontrol.Session: what fn returns leaves at
// once, after whatever was mapped before it, through the one emission path
// (emitLocked: positions, write-ahead, pipeline).
func (c *conversation) Control(ctx context.Context, fn func(n *openhandscontrol.Notes) []*aep.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mapped = append(c.mapped, fn(c.notes)...)
	c.flushLocked(ctx)
}

// Resend implements openhandscontrol.Session: the recorded ack goes to the
// pipeline again at its recorded position. It is a redelivery, so it is not
// written ahead: a crash loses at most a re-ack, which the sender's retry
// asks for again.
func (c *conversation) Resend(ctx context.Context, ev *aep.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked(ctx)
	if err := c.emitter.consume(ctx, c.emitter.records([]*aep.Event{ev})); err != nil {
		c.watch.rl.Error("emit:"+c.id, "could not re-send a recorded control ack", zap.String("conversation", c.id), zap.Error(err))
	}
}

// Save implements openhandscontrol.Session: what was mapped leaves, then
// the conversation's state, its control notes included, is stored alone.
// The batch stored last stays: the state stored with it differs from this
// one only in what emitted nothing.
func (c *conversation) Save(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked(ctx)
	return c.saveStateLocked(ctx)
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
