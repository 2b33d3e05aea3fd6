package endpoint

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8000", "https://relay.example/base"} {
		assert.NoError(t, Validate(ok), ok)
	}
	for _, bad := range []string{"", "ws://127.0.0.1", "http://", "127.0.0.1:8000", "::"} {
		assert.ErrorContains(t, Validate(bad), "must be an http or https URL", bad)
	}
}

func TestWebSocket(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:1/a/socket?x=1": "ws://h:1/a/socket?x=1",
		"https://h/b":             "wss://h/b",
	} {
		u, err := url.Parse(in)
		require.NoError(t, err)
		ws, err := WebSocket(u)
		require.NoError(t, err)
		assert.Equal(t, want, ws.String())
		assert.Equal(t, in, u.String(), "the input is not modified")
	}
	_, err := WebSocket(&url.URL{Scheme: "ftp", Host: "h"})
	assert.Error(t, err)
}
