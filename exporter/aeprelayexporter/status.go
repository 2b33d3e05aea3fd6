package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
)

// statusReporter reports the relay connection as component status: OK when
// the relay confirms, recoverable while it cannot be reached or refuses our
// credentials, permanent when it refuses us for good (version-unsupported,
// hello-required, another version selected). It reports changes only, and
// a permanent error is final, as the collector's status state machine
// requires. Refused credentials are also counted and logged.
type statusReporter struct {
	tel  *telemetry
	rate *ratelog.Logger

	mu        sync.Mutex
	host      component.Host
	last      componentstatus.Status
	permanent bool
}

func newStatusReporter(tel *telemetry, rate *ratelog.Logger) *statusReporter {
	return &statusReporter{tel: tel, rate: rate}
}

func (r *statusReporter) setHost(host component.Host) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.host = host
}

func (r *statusReporter) ok() {
	r.report(componentstatus.StatusOK, componentstatus.NewEvent(componentstatus.StatusOK))
}

func (r *statusReporter) recoverable(err error) {
	r.report(componentstatus.StatusRecoverableError, componentstatus.NewRecoverableErrorEvent(err))
}

func (r *statusReporter) permanentError(err error) {
	r.report(componentstatus.StatusPermanentError, componentstatus.NewPermanentErrorEvent(err))
}

// credentialsRefused counts and logs err if the relay refused our
// credentials, and reports whether it did. The error names the relay and
// the HTTP status, never the credential.
func (r *statusReporter) credentialsRefused(ctx context.Context, err error) bool {
	cerr, ok := errors.AsType[*credentialsError](err)
	if !ok {
		return false
	}
	r.tel.authRefused(ctx, cerr.code)
	r.rate.Error("credentials_refused", "AEP relay refused this exporter's credentials; retrying with backoff, events wait until it accepts them",
		zap.String("relay", cerr.relay), zap.Int("status_code", cerr.code), zap.Error(err))
	return true
}

func (r *statusReporter) report(status componentstatus.Status, ev *componentstatus.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.host == nil || r.permanent || status == r.last {
		return
	}
	r.last = status
	r.permanent = status == componentstatus.StatusPermanentError
	componentstatus.ReportStatus(r.host, ev)
}
