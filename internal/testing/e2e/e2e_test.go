package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// sockets are the receiver's two conversation transports: the
// seq-numbered /sockets/session of servers v1.45.0+ and the legacy
// /sockets/events every release serves.
var sockets = []struct {
	name, path string
}{
	{"session", string(oh.EndpointSession)},
	{"events", string(oh.EndpointEvents)},
}

// TestTwoConversations plays the scripted run on two conversations at once,
// step by step interleaved, then deletes one of them.
func TestTwoConversations(t *testing.T) {
	for _, socket := range sockets {
		t.Run("socket="+socket.name, func(t *testing.T) {
			e := newEnv(t)
			e.start(pipelineConfig{socket: socket.name})
			a, b := e.newConversation(), e.newConversation()
			e.awaitLive(a, 1)
			e.awaitLive(b, 1)

			sa, sb := newScript(t, a), newScript(t, b)
			for i := range runSteps {
				sa.play(i, i+1)
				sb.play(i, i+1)
			}
			e.awaitTypes(b, runTypes...)
			e.awaitTypes(a, runTypes...)
			require.NoError(t, a.Delete())
			ended := e.awaitTypes(a, "run.finished", "session.ended")

			assert.Equal(t, "killed", last(ended, "session.ended").Data["reason"])
			assert.Equal(t, append(append([]string{"session.started"}, runTypes...), "session.ended"), types(e.relayEvents(a.ID())))
			assert.Equal(t, append([]string{"session.started"}, runTypes...), types(e.relayEvents(b.ID())))
			assert.Equal(t, len(e.relay.Events()), e.relay.Received(), "without a fault nothing is redelivered")
			hellos := e.relay.Hellos()
			if assert.Len(t, hellos, 1, "one connection without a fault") {
				assert.Equal(t, "emitter", hellos[0].Role)
				assert.Equal(t, "openhands", hellos[0].Agent)
			}
			assertSocketPath(t, e.stub, socket.path)
			e.verify(a, b)
		})
	}
}

// assertSocketPath checks that every socket the receiver opened is on path.
func assertSocketPath(t *testing.T, stub *oh.Server, path string) {
	t.Helper()
	upgrades := 0
	for _, r := range stub.Requests() {
		if strings.HasPrefix(r.Path, "/sockets/") {
			upgrades++
			assert.True(t, strings.HasPrefix(r.Path, path+"/"), "socket %s is not on %s", r.Path, path)
		}
	}
	assert.Positive(t, upgrades, "no socket was opened")
}
