// Package endpoint checks the http(s) base URLs our components are
// configured with and derives their WebSocket forms.
package endpoint // import "github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"

import (
	"fmt"
	"net/url"
)

// Validate accepts an http or https URL with a host.
func Validate(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an http or https URL, got %q", endpoint)
	}
	return nil
}

// WebSocket returns a copy of u with its scheme moved to ws (http) or wss
// (https), the URL a socket on the same server is dialled at.
func WebSocket(u *url.URL) (*url.URL, error) {
	ws := *u
	switch u.Scheme {
	case "http":
		ws.Scheme = "ws"
	case "https":
		ws.Scheme = "wss"
	default:
		return nil, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	return &ws, nil
}
