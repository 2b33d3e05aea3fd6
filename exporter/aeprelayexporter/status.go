package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// statusReporter reports the relay connection as component status: OK when
// the relay confirms, recoverable while it cannot be reached, permanent
// when it refuses us for good (version-unsupported, credentials). It
// reports changes only, and a permanent error is final, as the collector's
// status state machine requires.
type statusReporter struct {
	mu        sync.Mutex
	host      component.Host
	last      componentstatus.Status
	permanent bool
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
