package aepreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
)

const scopeName = "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"

// logEvery bounds how often one cause of refusal is logged: a sender
// retrying a bad batch must not flood the collector's log.
const logEvery = time.Minute

// Paths of the HTTP POST binding (AEP-0003 §3.2) and discovery (§3.4).
const (
	eventsPath    = "/events"
	discoveryPath = "/.well-known/aep"
)

type aepReceiver struct {
	cfg      *Config
	set      receiver.Settings
	next     consumer.Logs
	tel      *telemetry
	obsrecv  *receiverhelper.ObsReport
	rl       *ratelog.Logger
	maxBody  int64
	discover []byte // the discovery document, fixed by the configuration

	tailer *tailer // nil unless jsonl.directory is set
	server *http.Server
	addr   net.Addr // where the server listens, once started
	served sync.WaitGroup
}

func newReceiver(cfg *Config, set receiver.Settings, next consumer.Logs) (*aepReceiver, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("aep receiver telemetry: %w", err)
	}
	obsrecv, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "http", ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, fmt.Errorf("aep receiver obsreport: %w", err)
	}
	discover, err := discoveryDocument(cfg.Capture)
	if err != nil {
		return nil, err
	}
	r := &aepReceiver{
		cfg: cfg, set: set, next: next, tel: tel, obsrecv: obsrecv,
		rl: ratelog.New(set.Logger, logEvery), discover: discover,
	}
	if cfg.JSONL.Directory != "" {
		if r.tailer, err = newTailer(r, cfg.JSONL); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *aepReceiver) Start(ctx context.Context, host component.Host) error {
	mux := http.NewServeMux()
	mux.HandleFunc(eventsPath, r.handleEvents)
	mux.HandleFunc(discoveryPath, r.handleDiscovery)
	// ToServer fills in the default body limit; read it from the copy.
	server := r.cfg.ServerConfig
	srv, err := server.ToServer(ctx, host.GetExtensions(), r.set.TelemetrySettings, mux,
		confighttp.WithErrorHandler(writeServerError))
	if err != nil {
		return fmt.Errorf("aep receiver: build the HTTP server: %w", err)
	}
	r.maxBody = server.MaxRequestBodySize
	if r.tailer != nil {
		if err := r.tailer.start(ctx, host); err != nil {
			return fmt.Errorf("aep receiver: %w", err)
		}
	}
	ln, err := server.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("aep receiver: listen on %s: %w", server.NetAddr.Endpoint, err)
	}
	r.server, r.addr = srv, ln.Addr()
	r.served.Add(1)
	go func() {
		defer r.served.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	r.set.Logger.Info("AEP HTTP POST binding listening", zap.Stringer("address", r.addr))
	return nil
}

func (r *aepReceiver) Shutdown(ctx context.Context) error {
	var errs []error
	if r.server != nil {
		errs = append(errs, r.server.Shutdown(ctx))
		r.served.Wait()
	}
	if r.tailer != nil {
		errs = append(errs, r.tailer.shutdown(ctx))
	}
	return errors.Join(errs...)
}
