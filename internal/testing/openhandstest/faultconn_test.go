package openhandstest

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStallSocketsForwardsNothing: a stalled socket stays open but answers
// no ping and delivers no event; a new connection is served normally.
func TestStallSocketsForwardsNothing(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{})
	errPong := errors.New("pong")
	ping := func(conn *websocket.Conn, wait time.Duration) error {
		conn.SetPongHandler(func(string) error { return errPong })
		require.NoError(t, conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(waitTimeout)))
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(wait)))
		_, _, err := conn.ReadMessage()
		return err
	}

	healthy := mustDial(t, s, EndpointSession, c.ID(), nil)
	readFrames(t, healthy, 2) // sync, full_state
	require.ErrorIs(t, ping(healthy, waitTimeout), errPong, "the server answers a ping")

	stalled := mustDial(t, s, EndpointSession, c.ID(), nil)
	readFrames(t, stalled, 2)
	c.StallSockets()
	_, err := c.Append(MessageEvent("agent", "never delivered"))
	require.NoError(t, err)
	var timeout net.Error
	require.ErrorAs(t, ping(stalled, 300*time.Millisecond), &timeout, "no pong, no frame")
	assert.True(t, timeout.Timeout())

	fresh := mustDial(t, s, EndpointSession, c.ID(), url.Values{"after_seq": {"-1"}})
	assert.Equal(t, "sync", readFrame(t, fresh)["type"])
	assert.Equal(t, "durable", readFrame(t, fresh)["type"], "a new connection is not stalled")
}

// TestTrickleFrameAnnouncesItsLengthThenTrickles: the header comes at once,
// the payload a byte at a time.
func TestTrickleFrameAnnouncesItsLengthThenTrickles(t *testing.T) {
	s := Start(t, Config{})
	c := newConversation(t, s, ConversationOptions{})
	conn := mustDial(t, s, EndpointSession, c.ID(), nil)
	readFrames(t, conn, 2)

	payload := strings.Repeat("x", 20)
	require.Equal(t, 1, c.TrickleFrame(EndpointSession, []byte(payload), 10*time.Millisecond))
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(waitTimeout)))
	started := time.Now()
	kind, r, err := conn.NextReader()
	require.NoError(t, err)
	assert.Equal(t, websocket.TextMessage, kind)
	first := make([]byte, 1)
	_, err = io.ReadFull(r, first)
	require.NoError(t, err)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, payload, string(first)+string(rest))
	assert.GreaterOrEqual(t, time.Since(started), 19*10*time.Millisecond, "a byte every interval")
}

// TestTrickleHeaderIsMinimal: the trickled frame's header encodes the
// length in the fewest bytes, as a real server's does (RFC 6455 §5.2).
func TestTrickleHeaderIsMinimal(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		header []byte
	}{
		{name: "7-bit length", n: 125, header: []byte{0x81, 125}},
		{name: "16-bit length", n: 126, header: []byte{0x81, 126, 0, 126}},
		{name: "64-bit length", n: 1 << 16, header: []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, client := net.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = (&faultConn{Conn: server}).trickle(make([]byte, tt.n), time.Millisecond)
			}()
			require.NoError(t, client.SetReadDeadline(time.Now().Add(waitTimeout)))
			header := make([]byte, len(tt.header))
			_, err := io.ReadFull(client, header)
			require.NoError(t, err)
			assert.Equal(t, tt.header, header)
			client.Close() // the payload's next byte fails: trickle ends
			<-done
		})
	}
}
