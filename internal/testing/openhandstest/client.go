package openhandstest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gorilla/websocket"
)

// DialSocket opens a client's socket on conversation id at host (the
// stub's Addr, or another process's) and authenticates as the SDK client
// does: no key in the URL, the auth frame first (brief §A.1).
func DialSocket(ctx context.Context, host string, endpoint Endpoint, id, key string) (*websocket.Conn, error) {
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, resp, err := dialer.DialContext(ctx, "ws://"+host+string(endpoint)+"/"+id, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial the socket of %s: %w", id, err)
	}
	auth, err := json.Marshal(map[string]string{"type": "auth", "session_api_key": key})
	if err == nil {
		err = conn.WriteMessage(websocket.TextMessage, auth)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("authenticate on %s: %w", id, err)
	}
	return conn, nil
}
