package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/logevent"
	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
)

// logEvery is how often one cause of a repeated log line is logged.
const logEvery = time.Minute

// transport is a relay binding: it delivers one push's events in order.
type transport interface {
	start(ctx context.Context, host component.Host) error
	// send takes the push's events from src and returns nil once the
	// relay confirmed every one, a permanent error when resending cannot
	// help, or a retryable one (an *unsentError when part of the push was
	// settled).
	send(ctx context.Context, src *pushSource) error
	shutdown(ctx context.Context) error
}

// relayExporter is the push function exporterhelper wraps, plus the start
// and shutdown of its transport.
type relayExporter struct {
	cfg       *Config
	logger    *zap.Logger
	rate      *ratelog.Logger
	tel       *telemetry
	status    *statusReporter
	converter converter
	transport transport
}

func newRelayExporter(cfg *Config, set exporter.Settings) (*relayExporter, error) {
	if err := endpoint.Validate(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	tel, err := newTelemetry(set.TelemetrySettings, cfg.Transport)
	if err != nil {
		return nil, fmt.Errorf("create the exporter's metrics: %w", err)
	}
	rate := ratelog.New(set.Logger, logEvery)
	e := &relayExporter{
		cfg:       cfg,
		logger:    set.Logger,
		rate:      rate,
		tel:       tel,
		status:    newStatusReporter(tel, rate),
		converter: converter{logevent.Converter{Ceiling: cfg.MaxCapture}},
	}
	switch cfg.Transport {
	case TransportHTTP:
		e.transport, err = newHTTPTransport(cfg, set.TelemetrySettings, tel, e.status, e.reject)
	default:
		e.transport, err = newSocketTransport(cfg, set.Logger, e.rate, tel, e.status, e.reject)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (e *relayExporter) start(ctx context.Context, host component.Host) error {
	e.status.setHost(host)
	if err := e.transport.start(ctx, host); err != nil {
		return err
	}
	endpoint.WarnPlaintext(e.logger, "endpoint", e.cfg.Endpoint, e.protected(host)...)
	return nil
}

// protected names what this exporter's link to the relay carries that a
// plaintext hop would expose: credentials, and commands the gate accepts.
func (e *relayExporter) protected(host component.Host) []string {
	carried := e.cfg.credentials()
	if e.cfg.Control != nil {
		if h, err := findControlHandler(*e.cfg.Control, host.GetExtensions()); err == nil && len(h.Accepts()) > 0 {
			carried = append(carried, "control commands")
		}
	}
	return carried
}

func (e *relayExporter) shutdown(ctx context.Context) error {
	return e.transport.shutdown(ctx)
}

// pushLogs sends one push's AEP events, in record order. Records that are
// not AEP events are skipped and events that can never be sent are
// dropped, each counted and logged; neither fails the push. A retryable
// failure carries only the records still to be sent, so a retry neither
// resends what the relay settled nor counts a drop twice.
func (e *relayExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	src := e.converter.source(ld)
	var err error
	if src.hasEvents() {
		err = e.transport.send(ctx, src)
	}
	batch := src.all()
	e.account(ctx, batch)
	if err == nil || consumererror.IsPermanent(err) {
		return err
	}
	pending := batch.events
	if unsent, ok := errors.AsType[*unsentError](err); ok {
		pending = unsent.pending
	}
	if len(pending) == ld.LogRecordCount() {
		return err
	}
	refs := make([]logevent.RecordRef, len(pending))
	for i, ev := range pending {
		refs[i] = ev.record
	}
	return consumererror.NewLogs(err, logevent.RecordsOf(ld, refs))
}

// account counts and logs what convert kept back.
func (e *relayExporter) account(ctx context.Context, batch converted) {
	if n := len(batch.skipped); n > 0 {
		e.tel.eventsSkipped.Add(ctx, int64(n))
		e.rate.Warn("not_aep", "skipping log records that are not AEP events (no dev.aep. event_name)",
			zap.Int("records", n), zap.String("first_event_name", batch.skipped[0]))
	}
	for _, r := range batch.refused {
		e.reject(ctx, r)
	}
}

// reject counts and logs one dropped event; the rest of its push goes on.
// An event the relay refused is a warning that names the relay's code; one
// this exporter cannot send is an error, and a command one that says where
// to look: a receiver that lets anyone emit under this collector's identity.
func (e *relayExporter) reject(ctx context.Context, r refusal) {
	if r.reason == reasonCommand {
		e.tel.commandRefused(ctx)
		e.rate.Error("command_refused", "refusing to send a control command to the AEP relay: an emitter never sends commands. "+
			"A receiver of this pipeline took it from outside; authenticate it (README: Security)",
			zap.String("type", r.typ), zap.Error(r.err))
		return
	}
	e.tel.rejected(ctx, r.reason, r.code)
	if r.code != "" {
		e.rate.Warn("relay_refused_"+r.code+"_"+r.typ, "the AEP relay refused an event; dropping it, never resending it",
			zap.String("id", r.id), zap.String("type", r.typ), zap.String("session", r.session),
			zap.String("code", r.code), zap.String("detail", r.detail))
		return
	}
	e.rate.Error("rejected_"+r.reason+"_"+r.typ, "dropping an AEP event that can never be sent",
		zap.String("reason", r.reason), zap.String("id", r.id), zap.String("type", r.typ), zap.Error(r.err))
}
