package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"context"
	"errors"
	"fmt"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Originator is what a component of the collector looks the extension up
// as to send a command of its own: the aeppolicy processor's pause of a
// conversation that breached a policy.
type Originator interface {
	// Originate executes cmd, a command the collector composed itself, as
	// it executes one from an authenticated relay link: deduplicated on
	// (source, id), addressed only to a session exactly one observed
	// conversation claims, under the same guards and rate limit, acked in
	// the session's stream with cause = cmd's id, its outcome cause-linked
	// the same way. With the gate off it does nothing at all and returns
	// ErrGateClosed. It does not wait for the command to execute.
	Originate(ctx context.Context, cmd *aep.Event) error
}

var _ Originator = (*gate)(nil)

// ErrGateClosed: the gate is off, and a collector-originated command is
// not even acked (a policy never writes anything with the gate closed).
var ErrGateClosed = errors.New("openhandscontrol: the control gate is off")

// Originate implements Originator. The command never crossed a link, so
// no credentials can be missing: it is the collector's own.
func (g *gate) Originate(ctx context.Context, cmd *aep.Event) error {
	if !g.cfg.Enabled {
		return ErrGateClosed
	}
	raw, err := cmd.MarshalJSON()
	if err != nil {
		return fmt.Errorf("openhandscontrol: encode the originated %s: %w", cmd.Type, err)
	}
	g.HandleCommand(ctx, raw, cmd, true)
	return nil
}
