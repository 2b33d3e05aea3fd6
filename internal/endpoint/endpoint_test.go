package endpoint

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestValidate(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8000", "https://relay.example/base", "http://h/a/"} {
		assert.NoError(t, Validate(ok), ok)
	}
	for _, tc := range []struct{ name, endpoint, want string }{
		{"empty", "", "must be an http or https URL"},
		{"websocket scheme", "ws://127.0.0.1", "must be an http or https URL"},
		{"no host", "http://", "must be an http or https URL"},
		{"no scheme", "127.0.0.1:8000", "must be an http or https URL"},
		{"unparsable", "::", "must be an http or https URL"},
		{"userinfo", "http://admin:hunter2@h:8000", "must not carry userinfo"},
		{"user only", "https://admin@h", "must not carry userinfo"},
		{"userinfo on a wrong scheme", "ftp://admin:hunter2@h", "must not carry userinfo"},
		{"userinfo in an unparsable URL", "http://admin:hunter2@h:port/", "must not carry userinfo"},
		{"userinfo with a bad escape", "http://admin:hu%zznter2@h/", "must not carry userinfo"},
		{"fragment", "http://h:8000/base#hunter2", "must not carry a fragment"},
		{"query on a wrong scheme", "ws://h:8000/?access_token=hunter2", "must be an http or https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.endpoint)
			require.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), "hunter2", "a secret in the URL is never printed")
		})
	}
}

func TestParseBase(t *testing.T) {
	_, err := Parse("https://relay.example/?access_token=t")
	require.NoError(t, err, "a relay endpoint may carry the relay's access_token")
	for _, tc := range []struct{ name, endpoint, want string }{
		{"query", "http://h:8000/base?tenant=hunter2", "must not carry a query"},
		{"empty query", "http://h:8000/?", "must not carry a query"},
		{"what Parse refuses", "http://admin:hunter2@h", "must not carry userinfo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBase(tc.endpoint)
			require.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
	u, err := ParseBase("http://h:8000/base/")
	require.NoError(t, err)
	assert.Equal(t, "/base/", u.Path)
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"trailing slash", "http://h:8000", "http://h:8000/", true},
		{"trailing slashes on a path", "http://h/base", "http://h/base//", true},
		{"default http port", "http://h", "http://h:80", true},
		{"default https port", "https://h/", "https://h:443", true},
		{"host case", "http://Agents.Example:8000", "http://agents.example:8000", true},
		{"scheme case", "HTTP://h", "http://h", true},
		{"trailing dot", "http://h.example.", "http://h.example", true},
		{"IPv6 spelling", "http://[0:0::1]:8000", "http://[::1]:8000", true},
		{"IPv4-mapped IPv6", "http://[::ffff:10.0.0.1]", "http://10.0.0.1", true},
		{"other port", "http://h:8000", "http://h:8001", false},
		{"other scheme", "http://h", "https://h", false},
		{"http on 443", "http://h:443", "https://h", false},
		{"other path", "http://h/a", "http://h/b", false},
		{"path case", "http://h/A", "http://h/a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := url.Parse(tc.a)
			require.NoError(t, err)
			b, err := url.Parse(tc.b)
			require.NoError(t, err)
			assert.Equal(t, tc.same, Key(a) == Key(b), "%s vs %s", Key(a), Key(b))
		})
	}
}

func TestPlaintext(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"http://agents.example:8000":    true,
		"http://10.0.0.7":               true,
		"http://[2001:db8::1]:8000":     true,
		"http://localhost.evil.example": true,
		"http://127.0.0.1:8000":         false,
		"http://127.8.9.10":             false,
		"http://[::1]:8000":             false,
		"http://[::ffff:127.0.0.1]":     false,
		"http://localhost:8000":         false,
		"http://LocalHost.":             false,
		"https://agents.example":        false,
		"::":                            false,
	} {
		assert.Equal(t, want, Plaintext(endpoint), endpoint)
	}
}

func TestWarnPlaintext(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint string
		carried  []string
		warned   bool
	}{
		{"key over plaintext", "http://agents.example:8000", []string{"session_api_key"}, true},
		{"token in the query", "http://agents.example:8000/?access_token=hunter2", []string{"session_api_key"}, true},
		{"nothing carried", "http://agents.example:8000", nil, false},
		{"loopback", "http://127.0.0.1:8000", []string{"session_api_key"}, false},
		{"https", "https://agents.example", []string{"token"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			WarnPlaintext(zap.New(core), "servers[0].endpoint", tc.endpoint, tc.carried...)
			if !tc.warned {
				assert.Zero(t, logs.Len())
				return
			}
			require.Equal(t, 1, logs.Len())
			fields := logs.All()[0].ContextMap()
			assert.Equal(t, "servers[0].endpoint", fields["key"])
			assert.Equal(t, redactQuery(tc.endpoint), fields["endpoint"])
			assert.NotContains(t, fields["endpoint"], "hunter2", "the query may hold a token")
			assert.Equal(t, []any{"session_api_key"}, fields["carries"])
		})
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
