package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
	"github.com/otelcol-openhands/otelcol-openhands/internal/epoch"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/internal/storageclient"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// logEvery is how often one cause of trouble may be logged, per server.
const logEvery = time.Minute

type openhandsReceiver struct {
	cfg      *Config
	set      receiver.Settings
	next     consumer.Logs
	tel      *telemetry
	redactor *capture.Redactor
	sockets  socketSettings // how every conversation socket is read

	host     component.Host
	storage  storage.Client // nil without storage
	cancel   context.CancelFunc
	watchers sync.WaitGroup
	webhook  *webhookSink // nil without a webhook section

	// sessions is what the control extension finds conversations in.
	sessions *sessionIndex
	// newNotes makes a session's control state: the control extension's,
	// nil without one.
	newNotes   openhandscontrol.NewNotesFunc
	unregister func()

	healthMu   sync.Mutex
	health     map[serverAspect]error // nil = healthy
	lastStatus componentstatus.Status
	lastErr    string
}

func newReceiver(cfg *Config, set receiver.Settings, next consumer.Logs) (*openhandsReceiver, error) {
	if err := cfg.Capture.validate(); err != nil {
		return nil, fmt.Errorf("create openhands receiver: %w", err)
	}
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("create openhands receiver telemetry: %w", err)
	}
	// Every event arrives over HTTP: the REST API, the WebSocket upgrade
	// or a webhook POST.
	if tel.obsrecv, err = receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "http", ReceiverCreateSettings: set,
	}); err != nil {
		return nil, fmt.Errorf("create openhands receiver obsreport: %w", err)
	}
	redactor, err := newRedactor(cfg)
	if err != nil {
		return nil, fmt.Errorf("create openhands receiver redaction: %w", err)
	}
	r := &openhandsReceiver{
		cfg: cfg, set: set, next: next, tel: tel, redactor: redactor,
		health:   make(map[serverAspect]error),
		sessions: newSessionIndex(),
		sockets:  defaultSocketSettings,
	}
	r.sockets.frames = newFrameBudget(frameBytesInFlight, &tel.frameBytesInFlight)
	return r, nil
}

func (r *openhandsReceiver) Start(ctx context.Context, host component.Host) error {
	r.host = host
	var control openhandscontrol.Registrar
	if r.cfg.Control != nil {
		var err error
		if control, err = findControl(*r.cfg.Control, host.GetExtensions()); err != nil {
			return err
		}
	}
	r.warnPlaintext()
	epoch := epoch.Process.Next()
	r.set.Logger.Info("openhands receiver starting", zap.Int64("aep.epoch", epoch), zap.Int("servers", len(r.cfg.Servers)),
		zap.Bool("storage", r.cfg.Storage != nil), zap.Intp("shard.index", r.cfg.Shard.Index), zap.Int("shard.count", r.cfg.Shard.Count))
	if r.cfg.Storage != nil {
		client, err := storageclient.Get(ctx, host, *r.cfg.Storage, component.KindReceiver, r.set.ID)
		if err != nil {
			return err
		}
		r.storage = client
	}
	// The discovered targets share the budget as one more server would.
	shares := len(r.cfg.Servers)
	if r.cfg.Targets.configured() {
		shares++
	}
	conversations, restConns := connectionBudget(descriptorLimit(), shares)
	apis := make([]*serverClient, len(r.cfg.Servers))
	for i := range r.cfg.Servers {
		api, err := r.newServerClient(ctx, host, &r.cfg.Servers[i], restConns)
		if err != nil {
			return errors.Join(fmt.Errorf("servers[%d]: %w", i, err), r.closeStorage(ctx))
		}
		apis[i] = api
		r.sessions.servers = append(r.sessions.servers, api.control())
	}
	if control != nil {
		r.newNotes, r.unregister = control.Register(r.sessions)
	}
	watches := make([]*serverWatch, 0, len(r.cfg.Servers))
	for i, api := range apis {
		w := r.newServerWatch(api, epoch)
		w.maxConversations = cmp.Or(r.cfg.Servers[i].MaxConversations, conversations)
		w.logger.Info("attaching at most max_conversations at once", zap.Int("max_conversations", w.maxConversations))
		watches = append(watches, w)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	var pool *targetPool
	if r.cfg.Targets.configured() {
		var err error
		if pool, err = r.newTargetPool(ctx, host, conversations+restConns); err != nil {
			cancel()
			return errors.Join(err, r.closeStorage(ctx))
		}
	}
	if r.cfg.Webhook.HasValue() {
		sink, err := r.startWebhook(ctx, host, watches, runCtx.Done())
		if err != nil {
			cancel()
			return errors.Join(err, r.closeStorage(ctx))
		}
		r.webhook = sink
	}
	r.cancel = cancel
	for _, w := range watches {
		r.watchers.Go(func() { w.run(runCtx) })
	}
	if pool != nil {
		r.watchers.Go(func() { pool.run(runCtx) })
	}
	return nil
}

// warnPlaintext warns once per server reached over plaintext http that
// carries its session key. An open control gate warns of its own writes
// (openhandscontrol.Registrar).
func (r *openhandsReceiver) warnPlaintext() {
	for i, s := range r.cfg.Servers {
		if s.SessionAPIKey != "" {
			endpoint.WarnPlaintext(r.set.Logger, fmt.Sprintf("servers[%d].endpoint", i), s.Endpoint, "session_api_key")
		}
	}
}

func (r *openhandsReceiver) Shutdown(ctx context.Context) error {
	if r.unregister != nil {
		r.unregister()
	}
	if r.cancel == nil {
		return r.closeStorage(ctx)
	}
	var hookErr error
	if r.webhook != nil {
		// The watches take pushes until the listener has stopped.
		hookErr = r.webhook.shutdown(ctx)
	}
	r.cancel()
	done := make(chan struct{})
	go func() {
		r.watchers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return errors.Join(hookErr, r.closeStorage(ctx))
	case <-ctx.Done():
		return fmt.Errorf("openhands receiver shutdown: %w", ctx.Err())
	}
}

func (r *openhandsReceiver) closeStorage(ctx context.Context) error {
	if r.storage == nil {
		return nil
	}
	client := r.storage
	r.storage = nil
	if err := client.Close(ctx); err != nil {
		return fmt.Errorf("openhands receiver: close storage: %w", err)
	}
	return nil
}

// newServerClient builds the client of one server; its REST connections
// are capped at restConns unless max_conns_per_host says otherwise.
func (r *openhandsReceiver) newServerClient(ctx context.Context, host component.Host, sc *ServerConfig, restConns int) (*serverClient, error) {
	base, err := url.Parse(sc.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	clientConfig := sc.ClientConfig
	clientConfig.MaxConnsPerHost = cmp.Or(clientConfig.MaxConnsPerHost, restConns)
	client, err := clientConfig.ToClient(ctx, host.GetExtensions(), r.set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	if client.Timeout == 0 {
		client.Timeout = defaultServerTimeout // a hung server must not stall discovery
	}
	// Go strips only Authorization and Cookie across hosts, never
	// X-Session-API-Key. The control gate writes with this client too.
	client.CheckRedirect = refuseRedirect
	tlsConfig, err := sc.TLS.LoadTLSConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	// proxy_url reaches the socket as it reaches REST; without it both
	// follow the environment (HTTP_PROXY, NO_PROXY).
	proxy := http.ProxyFromEnvironment
	if sc.ProxyURL != "" {
		u, err := url.Parse(sc.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("proxy_url: %w", err)
		}
		proxy = http.ProxyURL(u)
	}
	name := sc.Name
	if name == "" {
		name = base.Host
	}
	api := &serverClient{
		name:     name,
		base:     base,
		hostPort: hostPortOf(base),
		key:      sc.SessionAPIKey,
		client:   client,
		dialer: &websocket.Dialer{
			Proxy:            proxy,
			HandshakeTimeout: handshakeTimeout(sc.Timeout),
			TLSClientConfig:  tlsConfig,
			WriteBufferPool:  authFrameBuffers,
		},
		maxFrame:    r.cfg.MaxFrameBytes,
		sockets:     r.sockets,
		sessionOnly: sc.Socket == socketSession,
	}
	api.legacyOnly.Store(sc.Socket == socketEvents)
	return api, nil
}

// authFrameBuffers lends the write buffer of every conversation socket:
// the auth frame is the only data frame written, so an idle connection holds
// none (4 KiB each otherwise).
var authFrameBuffers = &sync.Pool{}

// defaultServerTimeout bounds each REST call and socket handshake when the
// server's timeout is not set.
const defaultServerTimeout = 30 * time.Second

func handshakeTimeout(configured time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return defaultServerTimeout
}

func (r *openhandsReceiver) newServerWatch(api *serverClient, epoch int64) *serverWatch {
	resource := pcommon.NewResource()
	projection.SetResource(resource, r.cfg.Agent)
	attrs := resource.Attributes()
	host, port, _ := net.SplitHostPort(api.hostPort)
	attrs.PutStr("server.address", host)
	if p, err := strconv.ParseInt(port, 10, 64); err == nil {
		attrs.PutInt("server.port", p)
	}
	attrs.PutStr("openhands.server.name", api.name)
	logger := r.set.Logger.With(zap.String("server", api.name))
	var j *journal
	if r.storage != nil {
		j = newJournal(r.storage, api.hostPort)
	}
	var pushes chan push
	window := lineageWindow
	if r.cfg.Webhook.HasValue() {
		pushes, window = make(chan push), webhookWindow
	}

	// One table per server: a failing server cannot use up the log budget
	// of another, and every line names its server.
	rl := ratelog.New(logger, logEvery)
	w := &serverWatch{
		api:             api,
		pollInterval:    r.cfg.PollInterval,
		health:          r.reportHealth,
		tel:             r.tel,
		logger:          logger,
		rl:              rl,
		shard:           r.cfg.Shard,
		journal:         j,
		epoch:           epoch,
		convs:           make(map[string]*conversation),
		onServer:        make(map[string]struct{}),
		waiting:         make(map[string]conversationInfo),
		recheckInterval: r.cfg.RecheckInterval,
		startAtEnd:      r.cfg.StartAt == startAtEnd,
		fromEnd:         make(map[string]struct{}),
		index:           r.sessions,
		ended:           newRecentIDs(endedWindow),
		pushes:          pushes,
		sessions: &sessionSettings{
			server: api, journal: j, next: r.next, resource: resource,
			tel: r.tel, logger: logger, rl: rl, retry: r.cfg.Reconnect,
			mapping: func(id string, epoch int64, lineage mapping.Lineage) mapping.Config {
				cfg := r.mappingConfig(api.hostPort, id, epoch)
				cfg.Lineage = lineage
				return cfg
			},
			newNotes:     r.newNotes,
			vendorWindow: window,
			webhook:      pushes != nil,
			// webhook.only: the pushes and events/search, no socket.
			pushOnly: r.cfg.Webhook.HasValue() && r.cfg.Webhook.Get().Only,
			tree:     newTreeMoves(rl),
		},
	}
	w.attaches = &attachSettings{
		api: api, tel: r.tel, logger: logger, rl: rl,
		reconnect: r.cfg.Reconnect, idleDetach: r.cfg.IdleDetach, fatal: w.reportConversationFatal,
	}
	return w
}

// healthAspect is one thing that can be wrong with a server.
type healthAspect int

const (
	healthSearch   healthAspect = iota // reachable, and accepting our key
	healthCapacity                     // every listed conversation has a socket
)

type serverAspect struct {
	server string
	aspect healthAspect
}

// reportHealth folds per-server health into the component status: any
// server refusing our key is a permanent error, any unreachable one, or
// one with conversations waiting for a socket, a recoverable error; else
// OK. Only changes are reported.
func (r *openhandsReceiver) reportHealth(server string, aspect healthAspect, err error) {
	if aspect == healthSearch {
		r.tel.searched(server, err == nil)
	}
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	r.health[serverAspect{server, aspect}] = err
	r.reportHealthLocked()
}

// forgetHealth drops a retired server's health.
func (r *openhandsReceiver) forgetHealth(server string) {
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	delete(r.health, serverAspect{server, healthSearch})
	delete(r.health, serverAspect{server, healthCapacity})
	r.reportHealthLocked()
}

func (r *openhandsReceiver) reportHealthLocked() {
	var permanent, recoverable []error
	for key, e := range r.health {
		switch {
		case e == nil:
		case errors.Is(e, errAuthRejected):
			permanent = append(permanent, fmt.Errorf("server %s: %w", key.server, e))
		default:
			recoverable = append(recoverable, fmt.Errorf("server %s: %w", key.server, e))
		}
	}
	var ev *componentstatus.Event
	switch {
	case len(permanent) > 0:
		ev = componentstatus.NewPermanentErrorEvent(errors.Join(permanent...))
	case len(recoverable) > 0:
		ev = componentstatus.NewRecoverableErrorEvent(errors.Join(recoverable...))
	default:
		ev = componentstatus.NewEvent(componentstatus.StatusOK)
	}
	errText := fmt.Sprint(ev.Err())
	if ev.Status() == r.lastStatus && errText == r.lastErr {
		return
	}
	r.lastStatus, r.lastErr = ev.Status(), errText
	componentstatus.ReportStatus(r.host, ev)
}
