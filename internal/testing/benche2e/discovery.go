package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// discoveryPoll is the receiver's poll_interval in the discovery
	// benchmark: the bounds it measures are in rounds.
	discoveryPoll = time.Second
	// steadyFor is how long requests and the stub's CPU are counted once
	// every conversation has been taken in.
	steadyFor = 20 * time.Second
	// deletedAtOnce is how many conversations the benchmark deletes at once.
	deletedAtOnce = 1000
)

// runDiscovery measures discovery at each size of -discovery: the stub
// holds that many idle conversations before the collector first starts
// (default max_conversations and idle_detach, poll_interval 1 s, storage
// on). It reports the time until every one of them has its
// state.snapshot at the relay (their history read); then, with nothing
// changing, the REST requests per round and the stub's CPU; the time
// until a conversation created then has its session.started at the
// relay, until a new event in an idle conversation (the first attached,
// whose socket later ones took once it was quiet, when there are more
// than max_conversations) arrives there, until one deleted has its
// session.ended there, and until deletedAtOnce more (fewer for a small
// size) deleted at once all have; and the collector's RSS, Go heap and
// storage. At the largest size the collector is then restarted on its
// storage and the time until a conversation created just before has its
// session.started at the relay is reported.
func runDiscovery(ctx context.Context, o options) error {
	fmt.Printf("Discovery: %s, poll_interval %s, max_conversations 1000, idle conversations on the stub before the first start.\n\n", o.collector, discoveryPoll)
	fmt.Println("| conversations | all taken in s | requests a round (search / count / by id) | stub CPU % | new conversation s | new event in an idle one s | one deleted s | up to 1,000 deleted s | RSS MB | Go heap MB | storage KiB |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for i, n := range o.discoverySizes {
		if err := measureDiscovery(ctx, o, n, i == len(o.discoverySizes)-1); err != nil {
			return fmt.Errorf("%d conversations: %w", n, err)
		}
	}
	return nil
}

func measureDiscovery(ctx context.Context, o options, n int, restart bool) error {
	rs := &receiverStorage{maxConversations: 1000, idleDetach: 10 * time.Minute, poll: discoveryPoll}
	o.conversations, o.status = n, "idle"
	r, ids, err := startRig(ctx, o, true, rs)
	if err != nil {
		return err
	}
	defer r.close()
	fmt.Printf("| %d | %.1f |", n, time.Since(r.oursStarted).Seconds())

	before, err := r.stubRequests(ctx)
	if err != nil {
		return err
	}
	cpu := newCPUMeter(map[string]*proc{"stub": r.stub})
	if err := pause(ctx, steadyFor); err != nil {
		return err
	}
	stubCPU := cpu.spent()["stub"]
	after, err := r.stubRequests(ctx)
	if err != nil {
		return err
	}
	rounds := steadyFor.Seconds() / discoveryPoll.Seconds()
	perRound := func(paths ...string) float64 {
		total := 0
		for _, p := range paths {
			total += after[p] - before[p]
		}
		return float64(total) / rounds
	}
	fmt.Printf(" %.1f / %.1f / %.1f | %.0f |", perRound("/api/conversations/search"), perRound("/api/conversations/count"),
		perRound("/api/conversations", "/api/conversations/{id}"), 100*stubCPU/steadyFor.Seconds())

	fresh, err := r.timed(ctx, func() ([]string, error) { return r.create(ctx, 1, "running") }, "session.started")
	if err != nil {
		return err
	}
	idle := ids[len(ids)-1:] // attached first, so the first to give its socket up

	touched, err := r.timed(ctx, func() ([]string, error) {
		_, err := r.stub.ask(ctx, "touch "+idle[0])
		return idle, err
	}, "tool.requested")
	if err != nil {
		return err
	}
	one, err := r.timed(ctx, func() ([]string, error) { return ids[1:2], r.deleteConversations(ctx, ids[1:2]) }, "session.ended")
	if err != nil {
		return err
	}
	gone := ids[2:min(len(ids)-1, 2+deletedAtOnce)]
	many, err := r.timed(ctx, func() ([]string, error) { return gone, r.deleteConversations(ctx, gone) }, "session.ended")
	if err != nil {
		return err
	}
	fmt.Printf(" %.1f | %.1f | %.1f | %.1f |", fresh.Seconds(), touched.Seconds(), one.Seconds(), many.Seconds())
	if err := r.printFootprint(ctx); err != nil {
		return err
	}
	if !restart {
		return nil
	}
	return r.restartOnStorage(ctx, o, rs, n-1-len(gone))
}

// timed runs act, which names the conversations it changed, and returns
// how long until each has an event of type typ at the relay.
func (r *rig) timed(ctx context.Context, act func() ([]string, error), typ string) (time.Duration, error) {
	start := time.Now()
	ids, err := act()
	if err != nil {
		return 0, err
	}
	if err := r.awaitMarked(ctx, typ, ids); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// restartOnStorage stops the collector, creates one conversation, starts
// the collector again on the same storage, which holds live
// conversations, and reports how long until that conversation has its
// session.started at the relay.
func (r *rig) restartOnStorage(ctx context.Context, o options, rs *receiverStorage, live int) error {
	r.ours.stop(time.Minute)
	fresh, err := r.create(ctx, 1, "running")
	if err != nil {
		return err
	}
	start := time.Now()
	if err := r.startOurs(ctx, o, "ours-restart", rs); err != nil {
		return err
	}
	if err := r.awaitMarked(ctx, "session.started", fresh); err != nil {
		return err
	}
	fmt.Printf("\nRestarted on storage holding %d live conversations: a conversation created meanwhile has its session.started at the relay after %.1f s; then",
		live, time.Since(start).Seconds())
	return r.printFootprint(ctx)
}

// stubRequests is the REST GETs the stub has served, by path.
func (r *rig) stubRequests(ctx context.Context) (map[string]int, error) {
	answer, err := r.stub.ask(ctx, "requests")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, f := range strings.Fields(strings.TrimPrefix(answer, "requests")) {
		path, count, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			return nil, fmt.Errorf("stub requests: %q", answer)
		}
		out[path] = n
	}
	return out, nil
}

// pause waits d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
