package openhandstest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDialSocket(t *testing.T) {
	tests := []struct {
		name     string
		endpoint Endpoint
		key      string
		// wantType is the first frame's type; "" wants close 4001.
		wantType string
	}{
		{name: "session socket", endpoint: EndpointSession, key: testKey, wantType: "sync"},
		{name: "events socket", endpoint: EndpointEvents, key: testKey, wantType: "ConversationStateUpdateEvent"},
		{name: "wrong key", endpoint: EndpointSession, key: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, Config{SessionAPIKeys: []string{testKey}})
			c := newConversation(t, s, ConversationOptions{})
			conn, err := DialSocket(ctxWithTimeout(t), s.Addr(), tt.endpoint, c.ID(), tt.key)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			if tt.wantType == "" {
				assert.Equal(t, 4001, expectClose(t, conn).Code)
				return
			}
			frame := readFrame(t, conn)
			typ := frame["type"]
			if tt.endpoint == EndpointEvents {
				typ = frame["kind"]
			}
			assert.Equal(t, tt.wantType, typ, "first frame %v", frame)
		})
	}
}
