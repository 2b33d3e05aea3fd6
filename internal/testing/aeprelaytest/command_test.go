package aeprelaytest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// claimant connects an emitter that claims session by sending its
// session.started over the socket, and waits for the claim.
func claimant(t *testing.T, r *Relay, session string, accepts ...string) *client {
	t.Helper()
	c := dial(t, r)
	c.greet(emitterHello("alpha", accepts...))
	conns := r.Connections()
	id := conns[len(conns)-1].ID // the newest is this one: tests dial in turn
	c.send(event("session.started", session, 0, 0))
	r.Await(t, "the claim on "+session, func(r *Relay) bool {
		for _, conn := range r.Connections() {
			if conn.ID == id && slices.Contains(conn.Claims, session) {
				return true
			}
		}
		return false
	})
	return c
}

func TestCommandRouting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token string
		// setup connects the claimants; the first one is the target.
		setup   func(t *testing.T, r *Relay) []*client
		command string
		code    string // "" when routed
	}{
		{"routed byte-identical", "sesame", func(t *testing.T, r *Relay) []*client {
			return []*client{claimant(t, r, "s1", "control.pause")}
		}, "control.pause", ""},
		{"vendor command routed", "sesame", func(t *testing.T, r *Relay) []*client {
			return []*client{claimant(t, r, "s1", "x.openhands.control.confirm")}
		}, "x.openhands.control.confirm", ""},
		{"no-route without a claimant", "sesame", func(*testing.T, *Relay) []*client { return nil }, "control.pause", "no-route"},
		{"no-route for history seeded over POST", "sesame", func(t *testing.T, r *Relay) []*client {
			status, _ := post(t, r, "application/json", event("session.started", "s1", 0, 0), nil)
			require.Equal(t, http.StatusAccepted, status)
			return nil
		}, "control.pause", "no-route"},
		{"no-route after session.ended", "sesame", func(t *testing.T, r *Relay) []*client {
			c := claimant(t, r, "s1", "control.pause")
			c.send(event("session.ended", "s1", 0, 1))
			r.Await(t, "the release", func(r *Relay) bool { return len(r.Connections()[0].Claims) == 0 })
			return nil
		}, "control.pause", "no-route"},
		{"no-route after the claimant left", "sesame", func(t *testing.T, r *Relay) []*client {
			c := claimant(t, r, "s1", "control.pause")
			require.NoError(t, c.ws.Close())
			r.Await(t, "the disconnect", func(r *Relay) bool { return len(r.Connections()) == 0 })
			return nil
		}, "control.pause", "no-route"},
		{"no-route once the claimant sent closing", "sesame", func(t *testing.T, r *Relay) []*client {
			c := claimant(t, r, "s1", "control.pause")
			c.send(`{"type":"closing","reason":"bye","delivered":[]}`)
			r.Await(t, "the closing frame", func(r *Relay) bool { return len(r.Frames()) == 2 })
			return nil
		}, "control.pause", "no-route"},
		{"ambiguous with two claimants", "sesame", func(t *testing.T, r *Relay) []*client {
			return []*client{claimant(t, r, "s1", "control.pause"), claimant(t, r, "s1", "control.pause")}
		}, "control.pause", "ambiguous"},
		{"unsupported outside accepts", "sesame", func(t *testing.T, r *Relay) []*client {
			return []*client{claimant(t, r, "s1")}
		}, "control.pause", "unsupported"},
		{"unauthorized on a tokenless relay", "", func(t *testing.T, r *Relay) []*client {
			return []*client{claimant(t, r, "s1", "control.pause")}
		}, "control.pause", "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Start(t, Config{Token: tc.token})
			targets := tc.setup(t, r)
			sender := dial(t, r)
			sender.greet(consumerHello)
			// Odd spacing proves the bytes are forwarded, never re-encoded.
			cmd := strings.Replace(command(tc.command, "cmd-1", "s1"), `"aep":"0.1"`, `"aep" : "0.1"`, 1)
			sender.send(cmd)

			if tc.code == "" {
				require.NotEmpty(t, targets)
				assert.Equal(t, cmd, string(targets[0].read()), "the claimant receives the command byte-identically")
				sender.expectSilence(100 * time.Millisecond)
			} else {
				var refusal map[string]any
				require.NoError(t, json.Unmarshal(sender.read(), &refusal))
				assert.Equal(t, "error", refusal["type"])
				assert.Equal(t, "cmd-1", refusal["cause"])
				assert.Equal(t, tc.code, refusal["code"])
				assert.NotEmpty(t, refusal["detail"])
				for _, target := range targets {
					target.expectSilence(100 * time.Millisecond)
				}
			}
			cmds := r.Commands()
			require.Len(t, cmds, 1)
			assert.Equal(t, "cmd-1", cmds[0].ID)
			assert.Equal(t, BindingSocket, cmds[0].Binding)
			if tc.code == "" {
				assert.Nil(t, cmds[0].Refusal)
				assert.NotZero(t, cmds[0].To)
			} else {
				require.NotNil(t, cmds[0].Refusal)
				assert.Equal(t, tc.code, cmds[0].Refusal.Code)
			}

			t.Run("SendCommand decides the same", func(t *testing.T) {
				refusal, err := r.SendCommand([]byte(command(tc.command, "cmd-2", "s1")))
				require.NoError(t, err)
				if tc.code == "" {
					assert.Nil(t, refusal)
					assert.Equal(t, command(tc.command, "cmd-2", "s1"), string(targets[0].read()))
					return
				}
				require.NotNil(t, refusal)
				assert.Equal(t, tc.code, refusal.Code)
				assert.Equal(t, "cmd-2", refusal.Cause)
			})
			assert.Empty(t, r.Violations())
		})
	}
}

func TestCommandAckIsASessionEvent(t *testing.T) {
	r := Start(t, Config{Token: "sesame"})
	target := claimant(t, r, "s1", "control.pause")
	sender := dial(t, r)
	sender.greet(consumerHello)
	sender.send(`{"type":"subscribe","id":"acks","filter":{"type":"control.*"}}`)
	assert.JSONEq(t, `{"type":"subscribed","id":"acks"}`, string(sender.read()))

	refusal, err := r.SendCommand([]byte(command("control.pause", "cmd-1", "s1")))
	require.NoError(t, err)
	require.Nil(t, refusal)
	assert.Equal(t, command("control.pause", "cmd-1", "s1"), string(target.read()))

	ack := `{"aep":"0.1","id":"ack-1","type":"control.accepted","time":"2026-07-03T10:00:01Z","source":"aep://host/agent/alpha/session/s1","agent":"alpha","session":"s1","seq":1,"epoch":0,"cause":"cmd-1","capture":"metadata"}`
	target.send(ack)
	assert.Equal(t, ack, string(sender.read()), "the ack fans out; the command itself never does")
	assert.Len(t, r.SessionEvents(sourceOf("s1"), "s1"), 2, "the ack is buffered")
	assert.Len(t, r.Commands(), 1, "an ack is not routed")
}

func TestSendCommandRefusesNonCommands(t *testing.T) {
	r := Start(t, Config{Token: "sesame"})
	_, err := r.SendCommand([]byte(event("session.started", "s1", 0, 0)))
	assert.ErrorContains(t, err, "not a command type")
	_, err = r.SendCommand([]byte(`{"type":"control.pause"}`))
	assert.Error(t, err)
	assert.Empty(t, r.Commands())
}
