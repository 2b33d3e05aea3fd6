// Command aeprelay runs the test AEP relay of package aeprelaytest as a
// standalone process, for demos and manual testing: POST /events, GET
// /stream (SSE), /socket (duplex), discovery and /healthz on one address.
// It logs to stderr and drains on SIGINT or SIGTERM (sockets get `closing`
// and close 1001, SSE streams `: shutting-down`), then exits 0.
//
// Usage:
//
//	aeprelay [-addr 127.0.0.1:8787] [-token T] [-buffer 10000] [-max-sessions 500]
//	         [-max-body 16777216] [-max-batch 10000] [-max-from N] [-max-queued 4096]
//	         [-max-records 100000] [-ping 0s] [-log-level info] [-cpuprofile FILE]
//
// The token defaults to $AEP_TOKEN; without one the relay is watch-only
// and refuses every command `unauthorized`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "aeprelay:", err)
		}
		os.Exit(2)
	}
}

// run serves until ctx ends, then drains.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("aeprelay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8787", "listen address (host:port)")
	token := fs.String("token", os.Getenv("AEP_TOKEN"), "bearer token (default $AEP_TOKEN); empty makes the relay watch-only")
	buffer := fs.Int("buffer", 10000, "replay buffer depth per (source, session)")
	maxSessions := fs.Int("max-sessions", 500, "buffered sessions; the least recently written is evicted")
	maxBody := fs.Int64("max-body", 16<<20, "largest POST body or socket frame, in bytes")
	maxBatch := fs.Int("max-batch", 10000, "most Events in one NDJSON POST")
	maxFrom := fs.Int("max-from", 0, "most resume positions per subscription (0: max-sessions)")
	maxQueued := fs.Int("max-queued", 4096, "live frames a slow consumer may have waiting before it is dropped")
	maxRecords := fs.Int("max-records", 100000, "entries each test record list keeps")
	ping := fs.Duration("ping", 0, "ping every socket at this interval (0: never)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	relay, err := aeprelaytest.New(aeprelaytest.Config{
		Addr: *addr, Token: *token, BufferPerSession: *buffer, MaxSessions: *maxSessions,
		MaxBody: *maxBody, MaxBatch: *maxBatch, MaxFrom: *maxFrom, MaxQueued: *maxQueued,
		MaxRecords: *maxRecords, PingInterval: *ping,
		DrainTimeout: 5 * time.Second, Logger: logger,
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down: draining connections")
	relay.Close()
	return nil
}
