package main

import (
	"context"
	"fmt"
	"time"
)

// soakSample is one reading of the collector during a soak.
type soakSample struct {
	at        time.Duration
	rss, heap uint64
	delivered int
}

// runSoak offers a steady rate over the conversations for the soak's
// duration and samples the collector's RSS and Go heap (after a forced
// collection), printing each sample as it is taken and the slope after the
// warm-up at the end.
func runSoak(ctx context.Context, o options) error {
	r, _, err := startRig(ctx, o, o.soakStorage, nil)
	if err != nil {
		return err
	}
	defer r.close()
	fmt.Printf("Soak: %d conversations, %g events/s, %s, exporter queue on file_storage: %t.\n\n",
		o.conversations, o.soakRate, o.soakDuration, o.soakStorage)
	fmt.Println("| minute | RSS MB | Go heap (live, after GC) MB | events delivered |")
	fmt.Println("|---|---|---|---|")
	loaded := make(chan error, 1)
	var appended int
	go func() {
		var err error
		appended, err = r.load(ctx, o.soakRate, o.soakDuration)
		loaded <- err
	}()
	start := time.Now()
	var samples []soakSample
	take := func() error {
		heap, _, err := heapStats(ctx, r.pprofAddr)
		if err != nil {
			return err
		}
		rss, err := rssBytes(r.ours.Pid())
		if err != nil {
			return err
		}
		s := soakSample{at: time.Since(start), rss: rss, heap: heap, delivered: r.watch.delivered()}
		samples = append(samples, s)
		fmt.Printf("| %.1f | %.1f | %.1f | %d |\n", s.at.Minutes(), mb(s.rss), mb(s.heap), s.delivered)
		return nil
	}
	if err := take(); err != nil {
		return err
	}
	ticker := time.NewTicker(o.soakSample)
	defer ticker.Stop()
	for done := false; !done; {
		select {
		case err := <-loaded:
			if err != nil {
				return err
			}
			done = true
		case <-ticker.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := take(); err != nil {
			return err
		}
	}
	if err := awaitCount(ctx, func() (int, error) { return r.watch.delivered(), r.watch.failure() }, appended, drainFor); err != nil {
		say("warning: %v", err)
	}
	var after []soakSample
	for _, s := range samples {
		if s.at >= o.soakWarm {
			after = append(after, s)
		}
	}
	fmt.Printf("\nAppended %d vendor events, %d tool events reached the relay subscriber.\n", appended, r.watch.delivered())
	if len(after) < 2 {
		fmt.Println("Too few samples after the warm-up for a slope.")
		return nil
	}
	rssSlope, heapSlope := slope(after, func(s soakSample) float64 { return mb(s.rss) }), slope(after, func(s soakSample) float64 { return mb(s.heap) })
	lo, hi := after[0].rss, after[0].rss
	for _, s := range after {
		lo, hi = min(lo, s.rss), max(hi, s.rss)
	}
	fmt.Printf("After %s of warm-up: RSS slope %+.2f MB/min, Go heap slope %+.2f MB/min; RSS range %.1f–%.1f MB (%.1f%% of its low).\n",
		o.soakWarm, rssSlope, heapSlope, mb(lo), mb(hi), 100*(float64(hi)-float64(lo))/float64(lo))
	return nil
}

// slope is the least-squares slope of value over minutes.
func slope(samples []soakSample, value func(soakSample) float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, s := range samples {
		x, y := s.at.Minutes(), value(s)
		n++
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}
