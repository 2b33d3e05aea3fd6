// Command benche2e is the out-of-process benchmark behind `make bench-e2e`:
// the built collector, the stub agent server (ohstub) and the test relay
// (aeprelay) run as separate processes, with beside them, in the same run
// so that they share the machine's noise:
//
//   - the floor: a bare Go WebSocket client process reading and
//     JSON-decoding the same stub frames as our receiver;
//   - the plain pipeline: the same collector binary running otlp → batch →
//     otlp_http, fed the same rate by an OTLP/HTTP load from this process
//     into a sink in this process.
//
// For each offered rate it prints p50/p99 latency (from the vendor event's
// append to its arrival: at a relay subscriber for ours, at the floor, at
// the sink for the plain pipeline) and CPU seconds per 1,000 events, read
// from /proc/<pid>/stat of each process. It then measures the sustained
// ceiling (a burst appended as fast as the stub takes it) and the heap and
// RSS of the collector with idle conversations attached.
//
// The aepfile exporter is measured on its own (disk.go): the same binary
// running otlp → batch → aepfile, fed AEP records at the same rates, with
// fsync none and every_batch: CPU per 1,000 events written and the events
// per second a burst reaches disk at.
//
// With -soak it runs N conversations at a steady rate for a set time
// instead, sampling the collector's RSS and Go heap, and reports the slope
// after warm-up.
//
// With -churn it measures the receiver's storage on file_storage over
// conversation churn instead: the storage directory's size after waves of
// conversations created and deleted, and a start with many live
// conversations in storage (time, RSS, heap).
//
// With -discovery it measures discovery at scale instead (discovery.go):
// the stub holding thousands of idle conversations, the requests and stub
// CPU a round costs, and how soon a new conversation, a new event, a
// deletion are seen.
//
// The stub and the relay are fixtures: their CPU is shown, not judged.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
)

const (
	stubKey    = "bench-session-key"
	relayToken = "bench-relay-token"
	// drainFor bounds the wait for the last events of a measurement.
	drainFor = 30 * time.Second
)

type options struct {
	collector, stub, relay string
	conversations          int
	rates                  []float64
	duration               time.Duration
	batchTimeout           time.Duration
	// floorHandoff: the floor hands each frame to a batching goroutine
	// (runFloor).
	floorHandoff bool
	burst        int
	idle         int
	profileDir   string
	disk         bool

	soak                               bool
	soakRate                           float64
	soakDuration, soakSample, soakWarm time.Duration
	soakStorage                        bool

	churn                            bool
	churnWave, churnWaves, churnLive int

	// discoverySizes are the idle conversations of each discovery
	// measurement; status is the one conversations are created in.
	discoverySizes []int
	status         string
}

func main() {
	var o options
	var rates string
	floor := flag.Bool("floor", false, "run as the floor client (internal)")
	floorIDs := flag.String("floor-ids", "", "conversation ids for -floor (internal)")
	floorStub := flag.String("floor-stub", "", "stub URL for -floor (internal)")
	flag.StringVar(&o.collector, "collector", "bin/otelcol-openhands", "the built collector")
	flag.StringVar(&o.stub, "stub", "bin/ohstub", "the stub agent server command")
	flag.StringVar(&o.relay, "relay", "bin/aeprelay", "the test relay command")
	flag.IntVar(&o.conversations, "conversations", 10, "busy conversations")
	flag.StringVar(&rates, "rates", "500,2000,5000", "offered rates, events/s in total")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "time per rate")
	flag.DurationVar(&o.batchTimeout, "batch-timeout", 200*time.Millisecond, "batch processor timeout of both pipelines")
	flag.BoolVar(&o.floorHandoff, "floor-handoff", false, "the floor also hands each frame to a goroutine batching them for the batch timeout, as a pipeline's batch processor does")
	floorBatch := flag.Duration("floor-batch", 0, "the floor's hand-off batch timeout (internal)")
	flag.IntVar(&o.burst, "burst", 2000, "events per conversation of the ceiling burst (0: skip)")
	flag.IntVar(&o.idle, "idle", 1000, "idle conversations attached for the heap and RSS figures (0: skip)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "save CPU and allocation profiles of our collector per rate here")
	flag.BoolVar(&o.disk, "disk", true, "also measure the aepfile exporter to disk, fsync none and every_batch")
	flag.BoolVar(&o.soak, "soak", false, "run the soak instead")
	flag.Float64Var(&o.soakRate, "soak-rate", 200, "soak: events/s in total")
	flag.DurationVar(&o.soakDuration, "soak-duration", 25*time.Minute, "soak: how long")
	flag.DurationVar(&o.soakSample, "soak-sample", time.Minute, "soak: sampling interval")
	flag.DurationVar(&o.soakWarm, "soak-warmup", time.Minute, "soak: warm-up left out of the slope")
	flag.BoolVar(&o.soakStorage, "soak-storage", true, "soak: the exporter queue on file_storage")
	flag.BoolVar(&o.churn, "churn", false, "run the storage churn benchmark instead")
	flag.IntVar(&o.churnWave, "churn-wave", 5000, "churn: conversations per wave")
	flag.IntVar(&o.churnWaves, "churn-waves", 4, "churn: waves after the warm-up wave")
	flag.IntVar(&o.churnLive, "churn-live", 50000, "churn: live conversations in storage at the measured start (0: skip)")
	discovery := flag.String("discovery", "", "run the discovery benchmark instead, at these numbers of idle conversations (e.g. 1000,10000,50000)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *floor:
		err = runFloor(ctx, *floorStub, stubKey, strings.Split(*floorIDs, ","), *floorBatch, os.Stdin, os.Stdout)
	case o.soak:
		err = runSoak(ctx, o)
	case o.churn:
		err = runChurn(ctx, o)
	case *discovery != "":
		if o.discoverySizes, err = parseSizes(*discovery); err == nil {
			err = runDiscovery(ctx, o)
		}
	default:
		if o.rates, err = parseRates(rates); err == nil {
			err = runBench(ctx, o)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benche2e:", err)
		os.Exit(1)
	}
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		var r float64
		if _, err := fmt.Sscan(f, &r); err != nil || r <= 0 {
			return nil, fmt.Errorf("-rates: %q is not a positive rate", f)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 4 {
			return nil, fmt.Errorf("-discovery: %q is not a number of conversations of at least 4", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// rig is the relay, its subscriber, the stub and our collector.
type rig struct {
	dir      string
	relay    *proc
	relayURL string
	watch    *relayWatch
	stub     *proc
	stubURL  string
	ours     *proc
	// oursStarted is when our collector last started.
	oursStarted time.Time
	pprofAddr   string
	// metricsAddr serves the collector's own telemetry (Prometheus).
	metricsAddr string
	// storageDir is file_storage's directory, "" without storage.
	storageDir string
	procs      []*proc
}

func (r *rig) close() {
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].stop(10 * time.Second)
	}
	fmt.Fprintln(os.Stderr, "process logs kept in", r.dir)
}

func (r *rig) keep(p *proc) *proc {
	r.procs = append(r.procs, p)
	return p
}

// startRig starts the relay, subscribes to it, starts the stub with n
// running conversations and our collector, and waits until the collector
// has attached every one of them.
func startRig(ctx context.Context, o options, storage bool, rs *receiverStorage) (*rig, []string, error) {
	dir, err := os.MkdirTemp("", "benche2e-")
	if err != nil {
		return nil, nil, err
	}
	r := &rig{dir: dir}
	fail := func(err error) (*rig, []string, error) {
		r.close()
		return nil, nil, err
	}
	relayAddr, err := childproc.FreeAddr()
	if err != nil {
		return fail(err)
	}
	// The relay subscriber must keep up with bursts: a deep live queue.
	relayArgs := []string{o.relay, "-addr", relayAddr, "-token", relayToken,
		"-max-queued", "1000000", "-max-records", "1000", "-max-sessions", "100000", "-buffer", "100", "-log-level", "warn"}
	if o.profileDir != "" {
		relayArgs = append(relayArgs, "-cpuprofile", filepath.Join(o.profileDir, "relay.pprof"))
	}
	relay, err := startProc("relay", dir, relayArgs)
	if err != nil {
		return fail(err)
	}
	r.relay, r.relayURL = r.keep(relay), "http://"+relayAddr
	if err := awaitHTTP(ctx, relay, r.relayURL+"/healthz"); err != nil {
		return fail(err)
	}
	if r.watch, err = watchRelay(ctx, r.relayURL, relayToken); err != nil {
		return fail(err)
	}
	stub, err := startProc("stub", dir, []string{o.stub, "-key", stubKey})
	if err != nil {
		return fail(err)
	}
	r.stub = r.keep(stub)
	line, err := stub.readLine(ctx)
	if err != nil {
		return fail(err)
	}
	r.stubURL = strings.TrimPrefix(line, "listening ")
	var ids []string
	if o.conversations > 0 {
		if ids, err = r.create(ctx, o.conversations, cmp.Or(o.status, "running")); err != nil {
			return fail(err)
		}
	}
	if r.pprofAddr, err = childproc.FreeAddr(); err != nil {
		return fail(err)
	}
	if r.metricsAddr, err = childproc.FreeAddr(); err != nil {
		return fail(err)
	}
	if storage {
		r.storageDir = dir + "/queue"
		if err := os.Mkdir(r.storageDir, 0o700); err != nil {
			return fail(err)
		}
	}
	if err := r.startOurs(ctx, o, "ours", rs); err != nil {
		return fail(err)
	}
	if err := r.awaitAttached(ctx, ids, max(time.Minute, time.Duration(len(ids))*100*time.Millisecond)); err != nil {
		return fail(err)
	}
	return r, ids, nil
}

// startOurs starts our collector as name and waits until it listens.
func (r *rig) startOurs(ctx context.Context, o options, name string, rs *receiverStorage) error {
	ours, err := startCollector(name, r.dir, o.collector,
		ourConfig(r.stubURL, stubKey, r.relayURL, relayToken, r.pprofAddr, r.metricsAddr, o.batchTimeout, r.storageDir, rs))
	if err != nil {
		return err
	}
	r.ours, r.oursStarted = r.keep(ours), time.Now()
	return awaitListening(ctx, ours, r.pprofAddr)
}

// create makes n conversations on the stub and returns their ids.
func (r *rig) create(ctx context.Context, n int, status string) ([]string, error) {
	answer, err := r.stub.ask(ctx, fmt.Sprintf("create %d %s", n, status))
	if err != nil {
		return nil, err
	}
	return strings.Fields(strings.TrimPrefix(answer, "created ")), nil
}

// awaitAttached waits until the relay has the snapshot of every id.
func (r *rig) awaitAttached(ctx context.Context, ids []string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for r.watch.attachedCount(ids) < len(ids) {
		if err := r.watch.failure(); err != nil {
			return err
		}
		select {
		case <-r.ours.Exited():
			return fmt.Errorf("our collector exited (see %s)", r.ours.stderr.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the collector attached %d of %d conversations within %s", r.watch.attachedCount(ids), len(ids), bound)
		}
	}
	return nil
}

// load has the stub append at rate for d and returns how many it did.
func (r *rig) load(ctx context.Context, rate float64, d time.Duration) (int, error) {
	answer, err := r.stub.ask(ctx, fmt.Sprintf("load %g %s", rate, d))
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscanf(answer, "done %d", &n)
	return n, err
}

func awaitHTTP(ctx context.Context, p *proc, url string) error {
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited while starting (see %s)", p.name, p.stderr.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitCount waits until count reaches want, or bound passes.
func awaitCount(ctx context.Context, count func() (int, error), want int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		n, err := count()
		if err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d arrived within %s", n, want, bound)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }
