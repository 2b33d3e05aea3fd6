package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
	"github.com/otelcol-openhands/otelcol-openhands/internal/epoch"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/targets"
)

// targetPool watches the agent servers its sources list: it is the only
// goroutine that attaches and retires them. Each source refreshes on its
// own; the pool merges their last good sets (a failed refresh keeps the
// previous one, so it never ends a session), attaches new targets within
// the budget and at attach_rate, and retires vanished ones after grace.
type targetPool struct {
	r       *openhandsReceiver
	cfg     *TargetsConfig
	host    component.Host
	sources []*targetSource
	// sets is each source's last good set, nil before its first.
	sets [][]targets.Target
	// static are the ids of the configured servers, never targets.
	static map[string]bool
	// watched are the targets with a running watch, listed or draining.
	watched map[string]*watchedTarget
	// pending are the listed targets waiting for budget or rate, in
	// listing order.
	pending []targets.Target
	limiter *rate.Limiter
	// maxTargets bounds len(watched); restConns and conversations are
	// each target's share of the descriptor budget.
	maxTargets, restConns, conversations int
	logger                               *zap.Logger
	rl                                   *ratelog.Logger
	now                                  func() time.Time
	// waitingReported is the pending count last reported to health.
	waitingReported int
}

// watchedTarget is one target's running watch.
type watchedTarget struct {
	target targets.Target
	watch  *serverWatch
	cancel context.CancelFunc
	done   chan struct{}
	// vanishedAt is when no source listed it any more; zero while listed.
	vanishedAt time.Time
	// failingSince is when its searches began to fail (unix nanoseconds),
	// 0 while the last one succeeded; the watch writes it.
	failingSince atomic.Int64
}

// targetRESTConns is each target's REST connections: one for its
// discovery polls, one for a history page or a control write beside it.
const targetRESTConns = 2

// poolTick is how often the pool attaches waiting targets and checks
// draining ones.
const poolTick = 100 * time.Millisecond

func (r *openhandsReceiver) newTargetPool(ctx context.Context, host component.Host, descriptors int) (*targetPool, error) {
	cfg := &r.cfg.Targets
	p := &targetPool{
		r: r, cfg: cfg, host: host,
		static:        make(map[string]bool, len(r.cfg.Servers)),
		watched:       make(map[string]*watchedTarget),
		restConns:     targetRESTConns,
		conversations: cfg.maxConversations(),
		logger:        r.set.Logger.With(zap.String("targets", "pool")),
		now:           time.Now,
	}
	p.rl = ratelog.New(p.logger, logEvery)
	p.maxTargets = cfg.MaxTargets
	if p.maxTargets == 0 {
		p.maxTargets = max(1, descriptors/(p.restConns+p.conversations))
	}
	rateLimit := cfg.attachRate()
	p.limiter = rate.NewLimiter(rate.Limit(rateLimit), max(1, int(rateLimit)))
	for _, s := range r.cfg.Servers {
		if u, err := endpoint.ParseBase(s.Endpoint); err == nil {
			p.static[endpoint.Key(u)] = true
		}
	}
	for i, f := range cfg.FileSD {
		p.sources = append(p.sources, newFileSource(i, f))
	}
	for i, h := range cfg.HTTPSD {
		if err := p.addSource(newHTTPSource(ctx, host, r.set.TelemetrySettings, i, h)); err != nil {
			return nil, err
		}
	}
	for i, h := range cfg.RuntimeAPI {
		if err := p.addSource(newRuntimeAPISource(ctx, host, r.set.TelemetrySettings, i, h)); err != nil {
			return nil, err
		}
	}
	for i, h := range cfg.AppServer {
		if err := p.addSource(newAppServerSource(ctx, host, r.set.TelemetrySettings, i, h)); err != nil {
			return nil, err
		}
	}
	p.sets = make([][]targets.Target, len(p.sources))
	p.logger.Info("watching discovered agent servers",
		zap.Int("sources", len(p.sources)), zap.Int("max_targets", p.maxTargets),
		zap.Int("max_conversations", p.conversations), zap.Float64("attach_rate", rateLimit))
	return p, nil
}

func (p *targetPool) addSource(s *targetSource, err error) error {
	if err == nil {
		p.sources = append(p.sources, s)
	}
	return err
}

func (p *targetPool) run(ctx context.Context) {
	updates := make(chan sourceUpdate)
	sourcesCtx, stopSources := context.WithCancel(ctx)
	var sources sync.WaitGroup
	for i, s := range p.sources {
		sources.Go(func() { s.run(sourcesCtx, i, updates) })
	}
	defer func() {
		stopSources()
		sources.Wait()
		p.stopAll()
	}()
	t := time.NewTicker(poolTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-updates:
			p.take(ctx, u)
		case <-t.C:
			p.drain(ctx)
			p.attachWaiting(ctx)
		}
	}
}

// take applies one refresh: a failed one changes nothing.
func (p *targetPool) take(ctx context.Context, u sourceUpdate) {
	name := p.sources[u.index].name
	p.r.tel.refreshed(ctx, name, u.err)
	if u.err != nil {
		p.rl.Warn("refresh:"+name, "target source refresh failed; its last good set stands",
			zap.String("source", name), zap.Error(u.err))
		return
	}
	for _, err := range u.skipped {
		p.rl.Warn("skipped:"+name, "target source lists a target that cannot be watched; the others are",
			zap.String("source", name), zap.Error(err))
	}
	p.sets[u.index] = u.targets
	p.reconcile(ctx)
}

// reconcile compares the merged set with what is watched: a new target
// waits its turn, a vanished one drains, one listed differently (a new
// key, new labels) is retired and attached anew, one listed again before
// its grace ran out is simply kept.
func (p *targetPool) reconcile(ctx context.Context) {
	listed := targets.Merge(p.static, p.sets...)
	current := make(map[string]targets.Target, len(p.watched))
	for id, wt := range p.watched {
		current[id] = wt.target
	}
	attach, retire := targets.Diff(current, listed)
	now := p.now()
	for _, id := range retire {
		wt := p.watched[id]
		if wt.vanishedAt.IsZero() {
			wt.vanishedAt = now
		}
	}
	p.pending = p.pending[:0]
	for _, t := range attach {
		if wt, ok := p.watched[t.ID]; ok {
			p.retire(ctx, wt, true) // its sessions were under the old key or labels
		}
		p.pending = append(p.pending, t)
	}
	for _, t := range listed {
		if wt, ok := p.watched[t.ID]; ok && wt.target.Equal(t) {
			wt.vanishedAt = time.Time{}
		}
	}
}

// attachWaiting attaches waiting targets while the budget and the rate
// allow.
func (p *targetPool) attachWaiting(ctx context.Context) {
	for len(p.pending) > 0 && len(p.watched) < p.maxTargets && p.limiter.Allow() {
		t := p.pending[0]
		p.pending = p.pending[1:]
		if err := p.attach(ctx, t); err != nil {
			p.rl.Warn("attach:"+t.ID, "cannot watch a discovered agent server", zap.String("server", t.ID), zap.Error(err))
		}
	}
	draining := 0
	for _, wt := range p.watched {
		if !wt.vanishedAt.IsZero() {
			draining++
		}
	}
	p.r.tel.targetStates(ctx, len(p.watched)-draining, draining, len(p.pending))
	waiting := 0
	if len(p.watched) >= p.maxTargets {
		waiting = len(p.pending)
	}
	if waiting != p.waitingReported {
		p.waitingReported = waiting
		var err error
		if waiting > 0 {
			err = fmt.Errorf("%d discovered agent servers wait: targets.max_targets (%d) are watched", waiting, p.maxTargets)
			p.rl.Warn("max_targets", "discovered agent servers wait for a slot", zap.Int("waiting", waiting), zap.Int("max_targets", p.maxTargets))
		}
		p.r.reportHealth("targets", healthCapacity, err)
	}
}

// attach starts the watch of one target.
func (p *targetPool) attach(ctx context.Context, t targets.Target) error {
	key, err := p.keyOf(t.Key, t.Endpoint)
	if err != nil {
		return fmt.Errorf("session key from %s: %w", t.Key, err)
	}
	if key != "" && endpoint.Plaintext(t.Endpoint) {
		p.rl.Warn("plaintext", "a discovered agent server's session key travels in the clear (http to a host that is not loopback)",
			zap.String("server", t.ID))
	}
	sc := ServerConfig{ClientConfig: confighttp.NewDefaultClientConfig(), SessionAPIKey: key, Name: t.ID, Socket: p.cfg.Socket}
	sc.Endpoint = t.Endpoint
	sc.Timeout = p.cfg.Timeout
	sc.TLS = p.cfg.TLS
	api, err := p.r.newServerClient(ctx, p.host, &sc, p.restConns)
	if err != nil {
		return err
	}
	w := p.r.newServerWatch(api, epoch.Process.Next())
	w.maxConversations = p.conversations
	// A label name has no dot (Prometheus' grammar, targets.Parse), so it
	// never replaces the dotted attributes the receiver sets.
	attrs := w.sessions.resource.Attributes()
	for k, v := range t.Attributes {
		attrs.PutStr(k, v)
	}
	wt := &watchedTarget{target: t, watch: w, done: make(chan struct{})}
	w.health = func(server string, aspect healthAspect, err error) {
		if aspect == healthSearch {
			wt.noteSearch(err, p.now())
		}
		p.r.reportHealth(server, aspect, err)
	}
	var watchCtx context.Context
	watchCtx, wt.cancel = context.WithCancel(ctx)
	p.watched[t.ID] = wt
	go func() {
		defer close(wt.done)
		w.run(watchCtx)
	}()
	return nil
}

func (wt *watchedTarget) noteSearch(err error, now time.Time) {
	if err == nil {
		wt.failingSince.Store(0)
		return
	}
	wt.failingSince.CompareAndSwap(0, now.UnixNano())
}

// drain retires the vanished targets that are done: one whose sessions
// all ended at once; past grace, one unreachable that long with its
// sessions ended, one still reachable let go with them open (the server
// still has them: whoever is given the target now observes them).
func (p *targetPool) drain(ctx context.Context) {
	var live map[*serverClient]int
	now := p.now()
	grace := p.cfg.grace()
	for _, wt := range p.watched {
		if wt.vanishedAt.IsZero() {
			continue
		}
		if live == nil {
			live = p.r.sessions.countByServer()
		}
		failing := wt.failingSince.Load()
		switch {
		case live[wt.watch.api] == 0:
			p.retire(ctx, wt, false)
		case failing != 0 && now.Sub(time.Unix(0, failing)) >= grace:
			p.logger.Info("ending the sessions of a vanished agent server unreachable past grace",
				zap.String("server", wt.target.ID), zap.Duration("grace", grace))
			p.retire(ctx, wt, true)
		case failing == 0 && now.Sub(wt.vanishedAt) >= grace:
			p.logger.Info("letting go of a vanished agent server still reachable past grace; its sessions stay open",
				zap.String("server", wt.target.ID), zap.Duration("grace", grace))
			p.retire(ctx, wt, false)
		}
	}
}

// retire stops a target's watch; end ends its sessions, else they leave
// the control index only.
func (p *targetPool) retire(ctx context.Context, wt *watchedTarget, end bool) {
	wt.cancel()
	<-wt.done
	wt.watch.release(ctx, end)
	delete(p.watched, wt.target.ID)
	p.r.forgetHealth(wt.watch.api.name)
	p.r.tel.forgetServer(wt.watch.api.name)
}

// stopAll stops every watch at shutdown: as for a static server, its
// sessions stay open (storage resumes them).
func (p *targetPool) stopAll() {
	for _, wt := range p.watched {
		wt.cancel()
	}
	for _, wt := range p.watched {
		<-wt.done
	}
}

// maxKeyBytes bounds a key file.
const maxKeyBytes = 4096

// keyOf reads a target's key where its labels say. A file or a variable
// is bound to the target's host and port: the file is named after them
// (keyName), inside session_api_key_dir (os.Root: no .., no symlink out),
// and the variable is session_api_key_env_prefix followed by them
// (keyEnvName). So a
// hostile source can neither send the collector's other secrets nor one
// agent server's key to a host of its choosing.
func (p *targetPool) keyOf(ref targets.KeyRef, endpoint string) (configopaque.String, error) {
	host := keyName(endpoint)
	switch ref.Source {
	case targets.KeyInline:
		return configopaque.String(ref.Value), nil
	case targets.KeyFile:
		if p.cfg.SessionAPIKeyDir == "" {
			return "", errors.New("targets.session_api_key_dir is not set")
		}
		if host == "" || ref.Value != host {
			return "", fmt.Errorf("a key file is named after its target's host and port: want %q", host)
		}
		root, err := os.OpenRoot(p.cfg.SessionAPIKeyDir)
		if err != nil {
			return "", err
		}
		defer root.Close()
		// O_NONBLOCK: a FIFO named by a label must not block the pool's
		// one goroutine on its open; it is then refused as not a file.
		f, err := root.OpenFile(ref.Value, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return "", errors.New("the key file is not a regular file")
		}
		data, err := readBounded(f, maxKeyBytes, "key file")
		if err != nil {
			return "", err
		}
		return configopaque.String(strings.TrimSpace(string(data))), nil
	case targets.KeyEnv:
		prefix := p.cfg.SessionAPIKeyEnvPrefix
		if prefix == "" {
			return "", errors.New("targets.session_api_key_env_prefix is not set")
		}
		if want := keyEnvName(prefix, host); host == "" || ref.Value != want {
			return "", fmt.Errorf("a key variable is named after its target's host and port: want %s", want)
		}
		v, ok := os.LookupEnv(ref.Value)
		if !ok {
			return "", fmt.Errorf("%s is not set", ref.Value)
		}
		return configopaque.String(v), nil
	}
	return "", nil
}

// keyName is the name a key file of the agent server at endpoint has:
// its host and port ("sandbox-a.svc_8000" for http://sandbox-a.svc:8000,
// "sb.example_443" for https://sb.example), as a Kubernetes Secret's key
// may spell it; "" for an endpoint that does not parse.
func keyName(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(u.Hostname()) + "_" + port
}

// keyEnvName is the variable that holds the key of the agent server whose
// key file would be named host: the prefix, then host in upper case with
// every character but a letter or a digit as "_"
// (OPENHANDS_KEY_SANDBOX_A_SVC_8000).
func keyEnvName(prefix, host string) string {
	return prefix + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, host)
}
