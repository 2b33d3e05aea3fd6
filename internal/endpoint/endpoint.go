// Package endpoint checks the http(s) base URLs our components are
// configured with and derives their WebSocket forms.
package endpoint // import "github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"go.uber.org/zap"
)

// Parse accepts an http or https URL with a host, and nothing an endpoint
// cannot carry: userinfo would be sent as Basic auth by some clients and
// not others (and printed wherever the URL is), and a fragment is never
// sent. No error quotes a password or a query.
func Parse(endpoint string) (*url.URL, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		if hasUserinfo(endpoint) {
			return nil, errUserinfo
		}
		return nil, fmt.Errorf("must be an http or https URL, got %q", redactQuery(endpoint))
	}
	switch {
	case u.User != nil:
		return nil, errUserinfo
	case u.Fragment != "":
		return nil, errors.New("must not carry a fragment (#...): it is never sent")
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("must be an http or https URL, got %q", redactQuery(endpoint))
	}
	return u, nil
}

// ParseBase is Parse for a base URL that every request builds its own
// query on, so it also refuses a query, which would be dropped.
func ParseBase(endpoint string) (*url.URL, error) {
	u, err := Parse(endpoint)
	if err == nil && (u.RawQuery != "" || u.ForceQuery) {
		return nil, errors.New("must not carry a query (?...): each request sets its own query, which would drop it")
	}
	return u, err
}

// redactQuery cuts the query off a URL about to be printed: it may carry
// a token (the relay's access_token).
func redactQuery(endpoint string) string {
	if before, _, ok := strings.Cut(endpoint, "?"); ok {
		return before + "?..."
	}
	return endpoint
}

var errUserinfo = errors.New("must not carry userinfo (user:password@): not every request would send it, and a URL gets logged; " +
	"give credentials as session_api_key, token, headers or auth")

// hasUserinfo reports whether the authority of an unparsable URL holds an
// '@', so its error must not quote it.
func hasUserinfo(endpoint string) bool {
	_, rest, ok := strings.Cut(endpoint, "//")
	if !ok {
		return strings.Contains(endpoint, "@")
	}
	authority, _, _ := strings.Cut(rest, "/")
	return strings.Contains(authority, "@")
}

// Validate accepts what Parse does.
func Validate(endpoint string) error {
	_, err := Parse(endpoint)
	return err
}

// Key is the identity of a parsed endpoint, equal for two spellings of one
// server: scheme and host lowercased, an IP address in its canonical form,
// the scheme's default port dropped, the path without trailing slashes.
func Key(u *url.URL) string {
	host := canonicalHost(u)
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host + strings.TrimRight(u.Path, "/")
}

// Plaintext reports whether what is sent to the endpoint crosses a network
// unencrypted: http to a host that is not loopback (127.0.0.0/8, ::1,
// localhost). An endpoint that does not parse is not reported.
func Plaintext(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return false
	}
	host := canonicalHost(u)
	if host == "localhost" {
		return false
	}
	addr, err := netip.ParseAddr(host)
	return err != nil || !addr.IsLoopback()
}

// canonicalHost is u's host as Key and Plaintext compare it: lowercased,
// without a trailing dot, an IP address in its canonical form (an
// IPv4-mapped IPv6 address as IPv4).
func canonicalHost(u *url.URL) string {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr.Unmap().String()
	}
	return host
}

// WarnPlaintext logs that what a component sends to endpoint (the value of
// key) crosses the network unencrypted, when it is Plaintext and carries
// something worth protecting (carried names it: a key, a token, control
// commands). Components call it once per endpoint at start. The endpoint
// is logged without its query.
func WarnPlaintext(logger *zap.Logger, key, endpoint string, carried ...string) {
	if len(carried) == 0 || !Plaintext(endpoint) {
		return
	}
	logger.Warn("plaintext http to a host that is not loopback: what it carries can be read and changed on the way; use https",
		zap.String("key", key), zap.String("endpoint", redactQuery(endpoint)), zap.Strings("carries", carried))
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
