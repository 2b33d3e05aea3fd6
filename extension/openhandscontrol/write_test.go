package openhandscontrol

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTransportFailureNamesNoAddress(t *testing.T) {
	const target = "http://10.1.2.3:8000/tenant-a/api/conversations/c1/pause"
	dial := func(err error) error {
		return &url.Error{Op: "Post", URL: target, Err: &net.OpError{Op: "dial", Net: "tcp",
			Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8000}, Err: err}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), "connection refused"},
		{"reset", &url.Error{Op: "Post", URL: target, Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "connection closed before the answer"},
		{"no route", dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), "no route to the host"},
		{"client timeout", &url.Error{Op: "Post", URL: target, Err: fmt.Errorf("%w (Client.Timeout exceeded)", context.DeadlineExceeded)}, "timeout"},
		{"dial timeout", dial(&timeoutError{}), "timeout"},
		{"shutting down", &url.Error{Op: "Post", URL: target, Err: context.Canceled}, "cancelled (the collector is shutting down)"},
		{"DNS", dial(&net.DNSError{Err: "no such host", Name: "agents.internal", IsNotFound: true}), "host name not resolved"},
		{"TLS unknown authority", &url.Error{Op: "Post", URL: target, Err: x509.UnknownAuthorityError{}}, "TLS handshake failed"},
		{"TLS wrong host", &url.Error{Op: "Post", URL: target, Err: x509.HostnameError{Host: "10.1.2.3", Certificate: &x509.Certificate{}}}, "TLS handshake failed"},
		{"TLS expired", &url.Error{Op: "Post", URL: target, Err: x509.CertificateInvalidError{Reason: x509.Expired, Cert: &x509.Certificate{}}}, "TLS handshake failed"},
		{"TLS to a plaintext port", &url.Error{Op: "Post", URL: target, Err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}}, "TLS handshake failed"},
		{"other", &url.Error{Op: "Post", URL: target, Err: errors.New("proxyconnect tcp: 10.1.2.3")}, "connection failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := transportFailure(tc.err)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "10.1.2.3")
		})
	}
}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }
