package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
)

// warmup is the load before the first measurement: JIT-free Go still has
// pools, buffers and connections to grow.
const warmup = 5 * time.Second

// rateRow is one offered rate's measurement.
type rateRow struct {
	rate               float64
	appended           int
	ours, floor, plain summary
	cpu                map[string]float64
	// batches and confirmMS: the exporter's confirmed batches and their
	// mean wait for the pong.
	batches   float64
	confirmMS float64
}

// ceilingRow is the burst's measurement.
type ceilingRow struct {
	events        int
	ours, floor   float64 // events/s
	cpu           map[string]float64
	oursN, floorN int
}

// idleRow is the collector with idle conversations attached.
type idleRow struct {
	n                     int
	heapBefore, heapAfter uint64
	rssBefore, rssAfter   uint64
}

func runBench(ctx context.Context, o options) error {
	r, ids, err := startRig(ctx, o, false, nil)
	if err != nil {
		return err
	}
	defer r.close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	floorArgs := []string{self, "-floor", "-floor-stub", r.stubURL, "-floor-ids", strings.Join(ids, ",")}
	if o.floorHandoff {
		floorArgs = append(floorArgs, "-floor-batch", o.batchTimeout.String())
	}
	floor, err := startProc("floor", r.dir, floorArgs)
	if err != nil {
		return err
	}
	r.keep(floor)
	if line, err := floor.readLine(ctx); err != nil || line != "ready" {
		return fmt.Errorf("floor did not start: %q %v", line, err)
	}
	sink, sinkRec, err := startOTLPSink()
	if err != nil {
		return err
	}
	defer sink.Close()
	otlpAddr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	plain, err := startCollector("plain", r.dir, o.collector, plainConfig(otlpAddr, sink.URL(), o.batchTimeout))
	if err != nil {
		return err
	}
	r.keep(plain)
	if err := awaitListening(ctx, plain, otlpAddr); err != nil {
		return err
	}
	m := &measure{r: r, floor: floor, sink: sinkRec, otlpURL: "http://" + otlpAddr + "/v1/logs",
		procs: map[string]*proc{"ours": r.ours, "floor": floor, "plain": plain, "stub": r.stub, "relay": r.relay}}

	say("warming up for %s", warmup)
	if _, err := m.rate(ctx, 200, warmup, ""); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	var rows []rateRow
	for _, rate := range o.rates {
		say("offering %g events/s for %s", rate, o.duration)
		profile := ""
		if o.profileDir != "" {
			profile = filepath.Join(o.profileDir, fmt.Sprintf("ours-%g", rate))
		}
		row, err := m.rate(ctx, rate, o.duration, profile)
		if err != nil {
			return fmt.Errorf("rate %g: %w", rate, err)
		}
		rows = append(rows, row)
	}
	var disk []diskRow
	if o.disk {
		if disk, err = runDisk(ctx, o, r.dir); err != nil {
			return fmt.Errorf("disk: %w", err)
		}
	}
	var ceiling *ceilingRow
	if o.burst > 0 {
		say("ceiling: a burst of %d events per conversation", o.burst)
		c, err := m.ceiling(ctx, o.burst, len(ids))
		if err != nil {
			return fmt.Errorf("ceiling: %w", err)
		}
		ceiling = &c
	}
	var idle *idleRow
	if o.idle > 0 {
		say("attaching %d idle conversations", o.idle)
		i, err := m.idle(ctx, o.idle)
		if err != nil {
			return fmt.Errorf("idle: %w", err)
		}
		idle = &i
	}
	printTable(o, rows, ceiling, idle)
	if disk != nil {
		printDisk(disk)
	}
	return nil
}

// measure runs the measurements on a started rig.
type measure struct {
	r       *rig
	floor   *proc
	sink    *recorder // what the plain pipeline delivered
	otlpURL string
	procs   map[string]*proc
}

// floorReport takes the floor's summary since the last one.
func (m *measure) floorReport(ctx context.Context) (summary, error) {
	var s summary
	answer, err := m.floor.ask(ctx, "report")
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal([]byte(answer), &s)
}

func (m *measure) floorCount(ctx context.Context) (int, error) {
	answer, err := m.floor.ask(ctx, "peek")
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscanf(answer, "count %d", &n)
	return n, err
}

// reset forgets every earlier arrival.
func (m *measure) reset(ctx context.Context) error {
	m.r.watch.rec.take()
	m.sink.take()
	_, err := m.floorReport(ctx)
	return err
}

// rate offers rate events/s to both pipelines for d, waits for the last
// arrivals, and reads each process's CPU over the whole of it.
func (m *measure) rate(ctx context.Context, rate float64, d time.Duration, profile string) (rateRow, error) {
	row := rateRow{rate: rate}
	if err := m.reset(ctx); err != nil {
		return row, err
	}
	cpu := newCPUMeter(m.procs)
	count0, sum0, err := confirmWait(ctx, m.r.metricsAddr)
	if err != nil {
		return row, err
	}
	var wg sync.WaitGroup
	var plainSent int
	var plainErr, cpuErr, allocsErr error
	wg.Go(func() { plainSent, plainErr = loadOTLP(ctx, m.otlpURL, rate, d, toolRecords) })
	if profile != "" {
		wg.Go(func() { cpuErr = saveProfile(ctx, m.r.pprofAddr, "profile", d, profile+".pprof") })
		wg.Go(func() { allocsErr = saveProfile(ctx, m.r.pprofAddr, "allocs", d, profile+".allocs.pprof") })
	}
	appended, err := m.r.load(ctx, rate, d)
	wg.Wait()
	if err = firstErr(err, plainErr, cpuErr, allocsErr); err != nil {
		return row, err
	}
	row.appended = appended
	// The drain is part of the work: CPU is read once everything arrived.
	if err := firstErr(
		awaitCount(ctx, func() (int, error) { return m.r.watch.rec.count(), m.r.watch.failure() }, appended, drainFor),
		awaitCount(ctx, func() (int, error) { return m.floorCount(ctx) }, appended, drainFor),
		awaitCount(ctx, func() (int, error) { return m.sink.count(), nil }, plainSent, drainFor),
	); err != nil {
		say("warning: %v", err)
	}
	row.cpu = cpu.spent()
	count1, sum1, err := confirmWait(ctx, m.r.metricsAddr)
	if err != nil {
		return row, err
	}
	if row.batches = count1 - count0; row.batches > 0 {
		row.confirmMS = 1000 * (sum1 - sum0) / row.batches
	}
	row.ours = m.r.watch.rec.take()
	row.plain = m.sink.take()
	row.floor, err = m.floorReport(ctx)
	return row, err
}

// ceiling appends burst events per conversation as fast as the stub takes
// them; each side's ceiling is the events over the time from the first
// append to its last arrival. Ours and the floor drain the same burst at
// once, so each competes with the other for the CPU.
func (m *measure) ceiling(ctx context.Context, burst, conversations int) (ceilingRow, error) {
	var row ceilingRow
	if err := m.reset(ctx); err != nil {
		return row, err
	}
	cpu := newCPUMeter(m.procs)
	start := time.Now()
	answer, err := m.r.stub.ask(ctx, fmt.Sprintf("burst %d", burst))
	if err != nil {
		return row, err
	}
	if _, err := fmt.Sscanf(answer, "done %d", &row.events); err != nil {
		return row, err
	}
	bound := 3 * time.Minute
	if err := firstErr(
		awaitCount(ctx, func() (int, error) { return m.r.watch.rec.count(), m.r.watch.failure() }, row.events, bound),
		awaitCount(ctx, func() (int, error) { return m.floorCount(ctx) }, row.events, bound),
	); err != nil {
		say("warning: %v", err)
	}
	row.cpu = cpu.spent()
	ours := m.r.watch.rec.take()
	floor, err := m.floorReport(ctx)
	if err != nil {
		return row, err
	}
	per := func(s summary) float64 {
		if s.LastUnix == 0 {
			return 0
		}
		return float64(s.Events) / time.Unix(0, s.LastUnix).Sub(start).Seconds()
	}
	row.ours, row.floor, row.oursN, row.floorN = per(ours), per(floor), ours.Events, floor.Events
	return row, nil
}

// idle attaches n idle conversations and reads the collector's heap and
// RSS before and after.
func (m *measure) idle(ctx context.Context, n int) (idleRow, error) {
	row := idleRow{n: n}
	var err error
	settle := func() (uint64, uint64, error) {
		time.Sleep(3 * time.Second)
		heap, _, err := heapStats(ctx, m.r.pprofAddr)
		if err != nil {
			return 0, 0, err
		}
		rss, err := rssBytes(m.r.ours.Pid())
		return heap, rss, err
	}
	if row.heapBefore, row.rssBefore, err = settle(); err != nil {
		return row, err
	}
	ids, err := m.r.create(ctx, n, "idle")
	if err != nil {
		return row, err
	}
	if err := m.r.awaitAttached(ctx, ids, 5*time.Minute); err != nil {
		return row, err
	}
	row.heapAfter, row.rssAfter, err = settle()
	return row, err
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// perThousand is CPU seconds per 1,000 events.
func perThousand(cpu float64, events int) string {
	if events == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", cpu/float64(events)*1000)
}

func printTable(o options, rows []rateRow, ceiling *ceilingRow, idle *idleRow) {
	fmt.Printf("\n%d busy conversations, %s per rate, batch timeout %s; ours, the floor and the plain OTLP pipeline side by side in one run.\n",
		o.conversations, o.duration, o.batchTimeout)
	if o.floorHandoff {
		fmt.Printf("The floor hands each frame to a goroutine batching them for %s, as the batch processor does (-floor-handoff).\n", o.batchTimeout)
	}
	fmt.Printf("The stub agent server and the test relay are fixtures: their CPU is shown, not judged.\n\n")
	fmt.Println("| rate | delivered ours / floor / plain | our p50 / p99 ms | floor p50 / p99 ms | plain p50 / p99 ms | our CPU-s per 1,000 | floor CPU-s per 1,000 | plain OTLP CPU-s per 1,000 | ours ÷ floor | our batches, mean confirm wait ms | stub, relay CPU-s per 1,000 (fixtures) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		ratio := "n/a"
		if r.ours.Events > 0 && r.floor.Events > 0 && r.cpu["floor"] > 0 {
			ratio = fmt.Sprintf("%.2f", (r.cpu["ours"]/float64(r.ours.Events))/(r.cpu["floor"]/float64(r.floor.Events)))
		}
		fmt.Printf("| %g/s | %d / %d / %d of %d | %.0f / %.0f | %.1f / %.1f | %.0f / %.0f | %s | %s | %s | %s | %.0f, %.1f | %s, %s |\n",
			r.rate, r.ours.Events, r.floor.Events, r.plain.Events, r.appended,
			r.ours.P50, r.ours.P99, r.floor.P50, r.floor.P99, r.plain.P50, r.plain.P99,
			perThousand(r.cpu["ours"], r.ours.Events), perThousand(r.cpu["floor"], r.floor.Events),
			perThousand(r.cpu["plain"], r.plain.Events), ratio, r.batches, r.confirmMS,
			perThousand(r.cpu["stub"], r.appended), perThousand(r.cpu["relay"], r.ours.Events))
	}
	if ceiling != nil {
		fmt.Printf("\nSustained ceiling (a burst of %d events, both draining it at once): ours %.0f events/s (%d arrived, %s CPU-s per 1,000), floor %.0f events/s (%d arrived); ours ÷ floor = %.0f%%.\n",
			ceiling.events, ceiling.ours, ceiling.oursN, perThousand(ceiling.cpu["ours"], ceiling.oursN),
			ceiling.floor, ceiling.floorN, 100*ceiling.ours/max(ceiling.floor, 1))
	}
	if idle != nil {
		fmt.Printf("\nIdle conversations: %d attached on top of %d busy ones. Go heap after GC %.1f → %.1f MB: %.1f KB per idle conversation. RSS %.1f → %.1f MB.\n",
			idle.n, o.conversations, mb(idle.heapBefore), mb(idle.heapAfter),
			(float64(idle.heapAfter)-float64(idle.heapBefore))/float64(idle.n)/1024, mb(idle.rssBefore), mb(idle.rssAfter))
	}
}
