package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
)

// maxDetailBytes bounds how much of an error answer becomes a detail.
const maxDetailBytes = 1024

// writeOutcome is what one REST write came to.
type writeOutcome struct {
	// status is the HTTP status, 0 when no answer arrived.
	status int
	// detail is the server's error detail, or what kept the answer from
	// arriving. It rides in the ack, so it never names the server's
	// address: err holds the transport error for the local log.
	detail string
	err    error
}

// writeAgentServer is the one place the distribution writes to an agent
// server: a REST POST under the conversation with the server's session key
// (X-Session-API-Key). The receiver only reads, and on the socket writes
// nothing but the auth frame, gated or not; the gate calls this only for a
// forwarded command.
func writeAgentServer(ctx context.Context, srv Server, w write) writeOutcome {
	body := io.Reader(http.NoBody)
	if w.body != nil {
		body = bytes.NewReader(w.body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.Base.JoinPath(w.path).String(), body)
	if err != nil {
		return writeOutcome{detail: fmt.Sprintf("POST %s: the request could not be built", w.path), err: err}
	}
	req.Header.Set("Accept", "application/json")
	if w.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if srv.Key != "" {
		req.Header.Set("X-Session-API-Key", string(srv.Key))
	}
	resp, err := srv.Client.Do(req)
	if err != nil {
		return writeOutcome{detail: fmt.Sprintf("POST %s: agent server unreachable: %s", w.path, transportFailure(err)), err: err}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxDetailBytes))
	out := writeOutcome{status: resp.StatusCode}
	if resp.StatusCode/100 != 2 {
		out.detail = fmt.Sprintf("POST %s: %s: %s", w.path, resp.Status, errorDetail(raw))
	}
	return out
}

// transportFailure names what kept a request from its answer without the
// URL, host or address the transport's error carries: the ack's detail
// travels to whoever reads the session, the agent server's address stays
// in the local log.
func transportFailure(err error) string {
	var dns *net.DNSError
	var tlsRecord tls.RecordHeaderError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled (the collector is shutting down)"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before the answer"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	case errors.As(err, &dns):
		return "host name not resolved"
	case errors.As(err, &tlsRecord), errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid):
		return "TLS handshake failed"
	default:
		return "connection failed"
	}
}

// errorDetail reads the server's {"detail": ...} error body (a string, or
// a validation list), falling back to the body itself.
func errorDetail(raw []byte) string {
	var body struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &body) == nil && len(body.Detail) > 0 {
		var s string
		if json.Unmarshal(body.Detail, &s) == nil {
			return s
		}
		return string(body.Detail)
	}
	return strings.TrimSpace(string(raw))
}

// result converts the outcome as the design record's reply guard does:
// 2xx accepted; 4xx (409 included) refused; no answer (unreachable) busy;
// 5xx busy too: the server was reached but failed, and may not next time.
func (o writeOutcome) result() result {
	switch {
	case o.status/100 == 2:
		return result{written: true}
	case o.status/100 == 4:
		return result{rejection: &rejection{reason: reasonRefused, detail: o.detail}}
	default:
		return result{rejection: &rejection{reason: reasonBusy, detail: o.detail}}
	}
}
