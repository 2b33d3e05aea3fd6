package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

const (
	// burstEvents is one iteration's work: this many vendor events, split
	// evenly over the conversations, appended as fast as the stub takes
	// them. The stub queues what its sockets have not written yet, so every
	// socket carries frames as fast as its reader takes them.
	burstEvents = 1000
	// floorBursts is how many bursts BenchmarkEndToEnd spends on its inline
	// floor measurement.
	floorBursts = 5
	// burstTimeout bounds one burst.
	burstTimeout = time.Minute
	// pollEvery is how often a burst checks for its last arrival.
	pollEvery = time.Millisecond
)

// benchConversations are the conversation counts of the sub-benchmarks.
var benchConversations = []int{1, 20}

// BenchmarkEndToEndStorage is BenchmarkEndToEnd with the receiver's
// storage off and on (file_storage, the exporter's queue in memory either
// way), so the cost of durable state reads side by side. With storage on it
// also reports storage-B/event: bytes (keys and values) the receiver wrote
// to storage per vendor event, its write-ahead batches and states.
func BenchmarkEndToEndStorage(b *testing.B) {
	for _, storage := range []bool{false, true} {
		for _, n := range benchConversations {
			name := fmt.Sprintf("storage=%t/conversations=%d", storage, n)
			b.Run(name, func(b *testing.B) {
				dir := ""
				if storage {
					dir = b.TempDir()
				}
				benchmarkPipeline(b, n, dir)
			})
		}
	}
}

// BenchmarkEndToEnd measures the collector between the stub agent server
// and the relay: N conversations each get burstEvents/N tool events per
// iteration (tool.requested / tool.completed, one AEP event each), and an
// iteration ends when the relay has admitted all of them. It reports
//
//   - events/s: vendor events per second of burst wall time;
//   - p50-ms, p99-ms: from the stub append of a vendor event to the relay
//     admitting its AEP event, over every event of every burst, so a burst's
//     queueing is part of it;
//   - heap-B/conv: live heap added per idle attached conversation (after
//     GC), the stub's server side of the conversation and its socket
//     included (BenchmarkFloor reports the same for a bare client, so the
//     collector's own share is the difference);
//   - floor-events/s and ratio_to_floor: the BenchmarkFloor client measured
//     inline, floorBursts bursts on the same conversations once the
//     collector has stopped, and our events/s over it.
//
// Both sides pay for the same producer. Where the bare client keeps up with
// it (BenchmarkFloor's p50 is then a fraction of a millisecond) the floor is
// the stub's own append rate, and ratio_to_floor is the share of it the
// pipeline sustains. The relay ingests in this process too: its validation
// and buffering share the CPU with the collector.
func BenchmarkEndToEnd(b *testing.B) {
	for _, n := range benchConversations {
		b.Run(fmt.Sprintf("conversations=%d", n), func(b *testing.B) { benchmarkEndToEnd(b, n) })
	}
}

// BenchmarkFloor measures what a bare Go client pays for the same bursts:
// one gorilla socket per conversation with the first-message auth frame,
// reading every frame and decoding its JSON, nothing else.
func BenchmarkFloor(b *testing.B) {
	for _, n := range benchConversations {
		b.Run(fmt.Sprintf("conversations=%d", n), func(b *testing.B) { benchmarkFloor(b, n) })
	}
}

func benchmarkEndToEnd(b *testing.B, n int) {
	stub, relay, convs, col := startPipeline(b, n, "")
	before, after := col.heapBefore, col.heapAfter
	stats := timeBursts(b, stub, convs, &relayArrivals{relay: relay})
	col.stop()

	floor := measureFloor(b, stub, convs, floorBursts)
	stats.report(b)
	b.ReportMetric(perConversation(before, after, n), "heap-B/conv")
	b.ReportMetric(floor.eventsPerSecond(), "floor-events/s")
	b.ReportMetric(stats.eventsPerSecond()/floor.eventsPerSecond(), "ratio_to_floor")
}

// benchmarkPipeline times bursts through the pipeline, with the
// receiver's storage in storageDir ("" for none).
func benchmarkPipeline(b *testing.B, n int, storageDir string) {
	stub, relay, convs, col := startPipeline(b, n, storageDir)
	written := storageWritten.Load()
	stats := timeBursts(b, stub, convs, &relayArrivals{relay: relay})
	written = storageWritten.Load() - written
	col.stop()
	stats.report(b)
	if storageDir != "" {
		b.ReportMetric(float64(written)/float64(b.N*burstEvents), "storage-B/event")
	}
}

// pipelineUnderTest is a running collector with the live heap measured
// around the attach of its conversations.
type pipelineUnderTest struct {
	*collector
	heapBefore, heapAfter uint64
}

// startPipeline starts the stub, the relay and the collector, and attaches
// n running conversations.
func startPipeline(b *testing.B, n int, storageDir string) (*oh.Server, *aeprelaytest.Relay, []*oh.Conversation, pipelineUnderTest) {
	stub := startBenchStub(b)
	relay := aeprelaytest.Start(b, aeprelaytest.Config{Token: relayToken, MaxRecords: 1 << 24, DrainTimeout: time.Second})
	col := startCollector(b, pipelineConfig{agentServer: stub.URL(), relay: relay.URL(), quiet: true, storage: storageDir})

	before := relayClearedHeap(b, stub, relay)
	convs := createConversations(b, stub, n)
	for _, conv := range convs {
		awaitRelayLive(b, relay, conv)
	}
	after := relayClearedHeap(b, stub, relay)
	return stub, relay, convs, pipelineUnderTest{collector: col, heapBefore: before, heapAfter: after}
}

func benchmarkFloor(b *testing.B, n int) {
	stub := startBenchStub(b)
	before := settledHeap(stub)
	convs := createConversations(b, stub, n)
	clients := attachFloor(b, stub, convs)
	after := settledHeap(stub)

	stats := timeBursts(b, stub, convs, clients)
	clients.close(b)
	stats.report(b)
	b.ReportMetric(perConversation(before, after, n), "heap-B/conv")
}

// startBenchStub starts a stub whose socket queues hold a whole burst: a
// burst must measure readers, not overflow drops.
func startBenchStub(b *testing.B) *oh.Server {
	return oh.Start(b, oh.Config{
		SessionAPIKeys:  []string{stubKey},
		MaxQueuedFrames: 4 * burstEvents,
		MaxQueuedBytes:  1 << 30,
	})
}

func createConversations(b *testing.B, stub *oh.Server, n int) []*oh.Conversation {
	convs := make([]*oh.Conversation, n)
	for i := range convs {
		conv, err := stub.CreateConversation(oh.ConversationOptions{})
		if err != nil {
			b.Fatalf("create conversation: %v", err)
		}
		if _, err := conv.SetStatus(oh.StatusRunning); err != nil {
			b.Fatalf("start the run of %s: %v", conv.ID(), err)
		}
		convs[i] = conv
	}
	return convs
}

// awaitRelayLive waits until the receiver attached conv and drained its
// history: its connect-time snapshot reached the relay.
func awaitRelayLive(b *testing.B, relay *aeprelaytest.Relay, conv *oh.Conversation) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err := relay.WaitFor(ctx, func(r *aeprelaytest.Relay) bool {
		for _, rec := range r.Events() {
			if rec.Event.Session == conv.ID() && rec.Event.Type == "state.snapshot" {
				return true
			}
		}
		return false
	})
	if err != nil {
		b.Fatalf("conversation %s never went live: %v", conv.ID(), err)
	}
}

// settledHeap is the live heap after two collections, with the stub's
// request log (which grows with every poll) emptied first.
func settledHeap(stub *oh.Server) uint64 {
	stub.ResetRecording()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// relayClearedHeap is settledHeap with the relay emptied first (its records
// are not the collector's memory), once the exporter has connected again.
func relayClearedHeap(b *testing.B, stub *oh.Server, relay *aeprelaytest.Relay) uint64 {
	if err := relay.Restart(aeprelaytest.ClearState); err != nil {
		b.Fatalf("clear the relay: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err := relay.WaitFor(ctx, func(r *aeprelaytest.Relay) bool {
		conns := r.Connections()
		return len(conns) == 1 && conns[0].Role == "emitter"
	})
	if err != nil {
		b.Fatalf("the exporter did not reconnect: %v", err)
	}
	return settledHeap(stub)
}

func perConversation(before, after uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}

// burst is one iteration's vendor events, built ahead of time (ids
// included, so that arrivals can be matched to sends).
type burst struct {
	stub   *oh.Server
	convs  []*oh.Conversation
	events [][]oh.Event // per conversation, in append order
}

// newBurst builds perConv events per conversation: tool calls, each
// followed by its result.
func newBurst(stub *oh.Server, convs []*oh.Conversation, perConv int) *burst {
	stub.ResetRecording() // bounded memory however long the benchmark runs
	bu := &burst{stub: stub, convs: convs, events: make([][]oh.Event, len(convs))}
	for i := range convs {
		var action oh.Event
		for j := range perConv {
			var ev oh.Event
			if j%2 == 0 {
				action = oh.TerminalAction("ls")
				ev = action
			} else {
				ev = oh.ObservationEvent(action, "README.md", false)
			}
			ev["id"] = oh.NewUUID()
			bu.events[i] = append(bu.events[i], ev)
		}
	}
	return bu
}

// arrivals is where a burst's events are awaited: the relay, or the floor
// clients.
type arrivals interface {
	// arm forgets what earlier bursts delivered.
	arm()
	// await returns, once every vendor event id in sent has arrived, the
	// time each one did.
	await(ctx context.Context, sent map[string]time.Time) (map[string]time.Time, error)
}

// burstResult is one burst's wall time and per-event latencies.
type burstResult struct {
	events    int
	elapsed   time.Duration
	latencies []time.Duration
	err       error
}

// run appends the burst, one goroutine per conversation, and waits for
// every event at dest.
func (bu *burst) run(dest arrivals) burstResult {
	sent := make([]map[string]time.Time, len(bu.convs))
	errs := make([]error, len(bu.convs))
	start := time.Now()
	var wg sync.WaitGroup
	for i, conv := range bu.convs {
		wg.Go(func() {
			times := make(map[string]time.Time, len(bu.events[i]))
			for _, ev := range bu.events[i] {
				times[ev.ID()] = time.Now()
				if _, err := conv.Append(ev); err != nil {
					errs[i] = fmt.Errorf("append to %s: %w", conv.ID(), err)
					return
				}
			}
			sent[i] = times
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return burstResult{err: err}
	}
	all := make(map[string]time.Time, burstEvents)
	for _, times := range sent {
		for id, at := range times {
			all[id] = at
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), burstTimeout)
	defer cancel()
	arrived, err := dest.await(ctx, all)
	res := burstResult{events: len(all), elapsed: time.Since(start), err: err}
	for id, at := range all {
		if got, ok := arrived[id]; ok {
			res.latencies = append(res.latencies, got.Sub(at))
		}
	}
	return res
}

// burstStats sums the bursts of one benchmark run.
type burstStats struct {
	events    int
	elapsed   time.Duration
	latencies []time.Duration
}

func (s *burstStats) add(b *testing.B, r burstResult) {
	if r.err != nil {
		b.Fatalf("burst: %v", r.err)
	}
	s.events += r.events
	s.elapsed += r.elapsed
	s.latencies = append(s.latencies, r.latencies...)
}

func (s *burstStats) eventsPerSecond() float64 {
	return float64(s.events) / s.elapsed.Seconds()
}

func (s *burstStats) report(b *testing.B) {
	if len(s.latencies) == 0 {
		b.Fatal("no latencies: no burst ran")
	}
	slices.Sort(s.latencies)
	percentile := func(p float64) float64 {
		return float64(s.latencies[int(p*float64(len(s.latencies)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(s.eventsPerSecond(), "events/s")
	b.ReportMetric(percentile(0.50), "p50-ms")
	b.ReportMetric(percentile(0.99), "p99-ms")
}

// relayArrivals awaits a burst at the relay by the vendor_event_id of the
// AEP events it admits.
type relayArrivals struct {
	relay    *aeprelaytest.Relay
	received int // deliveries before the burst
	admitted int // admitted events before the burst
}

// arm notes where the relay stands before a burst.
func (d *relayArrivals) arm() {
	d.received = d.relay.Received()
	d.admitted = len(d.relay.Events())
}

func (d *relayArrivals) await(ctx context.Context, sent map[string]time.Time) (map[string]time.Time, error) {
	// Deliveries are counted cheaply; the admitted events are read once they
	// can all be there (a redelivery counts too, hence the loop).
	target := d.received + len(sent)
	arrived := make(map[string]time.Time, len(sent))
	for {
		if err := poll(ctx, func() bool { return d.relay.Received() >= target }); err != nil {
			return nil, fmt.Errorf("relay admitted %d of %d events: %w", len(arrived), len(sent), err)
		}
		events := d.relay.Events()
		for _, rec := range events[d.admitted:] {
			vid, _ := rec.Event.Data["vendor_event_id"].(string)
			if _, ok := sent[vid]; ok {
				arrived[vid] = rec.ReceivedAt
			}
		}
		if len(arrived) == len(sent) {
			return arrived, nil
		}
		d.admitted = len(events)
		target = d.relay.Received() + 1
	}
}

// poll checks done every pollEvery until it holds or ctx ends.
func poll(ctx context.Context, done func() bool) error {
	ticker := time.NewTicker(pollEvery)
	defer ticker.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
	return nil
}

// floorClient is the floor: one socket on the endpoint the receiver picks
// on this stub (/sockets/session, live only), reading frames and decoding
// their JSON, noting when each event id arrived.
type floorClient struct {
	conn  *websocket.Conn
	done  chan struct{}
	count atomic.Int64

	mu       sync.Mutex
	arrivals map[string]time.Time
	err      error
}

func dialFloor(ctx context.Context, stub *oh.Server, conv *oh.Conversation) (*floorClient, error) {
	conn, err := oh.DialSocket(ctx, stub.Addr(), oh.EndpointSession, conv.ID(), stubKey)
	if err != nil {
		return nil, err
	}
	c := &floorClient{conn: conn, done: make(chan struct{}), arrivals: map[string]time.Time{}}
	go c.read()
	return c, nil
}

func (c *floorClient) read() {
	defer close(c.done)
	for {
		_, data, err := c.conn.ReadMessage()
		if err != nil {
			c.fail(err)
			return
		}
		var frame map[string]any
		if err := json.Unmarshal(data, &frame); err != nil {
			c.fail(fmt.Errorf("decode frame: %w", err))
			return
		}
		event, _ := frame["event"].(map[string]any) // durable and transient frames
		id, _ := event["id"].(string)
		at := time.Now()
		c.mu.Lock()
		c.arrivals[id] = at
		c.mu.Unlock()
		c.count.Add(1)
	}
}

func (c *floorClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// floorClients are the floor's sockets, one per conversation.
type floorClients struct {
	clients []*floorClient
	base    int64 // frames read before the burst
}

// attachFloor connects one floor client per conversation and waits until
// the stub has them all live.
func attachFloor(b *testing.B, stub *oh.Server, convs []*oh.Conversation) *floorClients {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	fc := &floorClients{}
	for _, conv := range convs {
		c, err := dialFloor(ctx, stub, conv)
		if err != nil {
			fc.close(b)
			b.Fatal(err)
		}
		fc.clients = append(fc.clients, c)
		if err := conv.WaitSockets(ctx, 1); err != nil {
			fc.close(b)
			b.Fatal(err)
		}
	}
	return fc
}

func (fc *floorClients) total() int64 {
	var n int64
	for _, c := range fc.clients {
		n += c.count.Load()
	}
	return n
}

// arm forgets earlier arrivals and notes the frame count before a burst.
func (fc *floorClients) arm() {
	for _, c := range fc.clients {
		c.mu.Lock()
		clear(c.arrivals)
		c.mu.Unlock()
	}
	fc.base = fc.total()
}

func (fc *floorClients) await(ctx context.Context, sent map[string]time.Time) (map[string]time.Time, error) {
	target := fc.base + int64(len(sent))
	err := poll(ctx, func() bool {
		for _, c := range fc.clients {
			c.mu.Lock()
			failed := c.err
			c.mu.Unlock()
			if failed != nil {
				return true
			}
		}
		return fc.total() >= target
	})
	if err != nil {
		return nil, fmt.Errorf("floor clients read %d of %d frames: %w", fc.total()-fc.base, len(sent), err)
	}
	arrived := make(map[string]time.Time, len(sent))
	for _, c := range fc.clients {
		c.mu.Lock()
		if c.err != nil {
			err = errors.Join(err, c.err)
		}
		for id, at := range c.arrivals {
			if _, ok := sent[id]; ok {
				arrived[id] = at
			}
		}
		c.mu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("floor client: %w", err)
	}
	if len(arrived) != len(sent) {
		return nil, fmt.Errorf("floor clients got %d of %d events", len(arrived), len(sent))
	}
	return arrived, nil
}

// close drops every floor socket and waits for its reader.
func (fc *floorClients) close(b *testing.B) {
	for _, c := range fc.clients {
		c.conn.Close()
		select {
		case <-c.done:
		case <-time.After(waitFor):
			b.Errorf("a floor reader did not stop")
		}
	}
}

// measureFloor runs bursts bursts against floor clients on convs, once
// nothing else is attached to them.
func measureFloor(b *testing.B, stub *oh.Server, convs []*oh.Conversation, bursts int) *burstStats {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, conv := range convs {
		if err := poll(ctx, func() bool { return conv.Sockets() == 0 }); err != nil {
			b.Fatalf("the collector's socket on %s stayed open: %v", conv.ID(), err)
		}
	}
	clients := attachFloor(b, stub, convs)
	defer clients.close(b)
	stats := &burstStats{}
	for range bursts {
		stats.add(b, nextBurst(stub, convs, clients).run(clients))
	}
	return stats
}

// timeBursts plays b.N bursts into dest, timing only the bursts: building
// each burst and arming dest stay off the clock.
func timeBursts(b *testing.B, stub *oh.Server, convs []*oh.Conversation, dest arrivals) *burstStats {
	stats := &burstStats{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		bu := nextBurst(stub, convs, dest)
		b.StartTimer()
		stats.add(b, bu.run(dest))
	}
	b.StopTimer()
	return stats
}

// nextBurst builds a burst of burstEvents spread over convs and arms dest
// to await it.
func nextBurst(stub *oh.Server, convs []*oh.Conversation, dest arrivals) *burst {
	bu := newBurst(stub, convs, burstEvents/len(convs))
	dest.arm()
	return bu
}
