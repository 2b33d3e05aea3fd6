// Command ohstub runs the stub agent server of package openhandstest as its
// own process, driven line by line on stdin, for the out-of-process
// benchmark (internal/testing/benche2e) and manual testing. It prints
// "listening <base URL>" once serving, then answers each command with one
// line:
//
//	create N [running|idle]   → "created <id> <id> …"   (N new conversations)
//	load RATE DURATION        → "done <events>"          (tool events at RATE/s in total, round robin)
//	burst N                   → "done <events>"          (N tool events per conversation, as fast as taken)
//	large BYTES               → "done <events>"          (one agent message of BYTES per conversation, all at once)
//	touch ID                  → "done 1"                 (one tool event in conversation ID)
//	requests                  → "requests <path>=<n> …"  (REST GETs served so far, by path, ids as {id})
//
// Tool events alternate a terminal action and its observation, one AEP
// event each. Every event is stamped with the time it is appended, at
// microsecond precision, which is what latency is measured from. Errors
// print "error <text>". ohstub exits when stdin closes or on SIGTERM.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// pace is how often a load wakes up to append what is due.
const pace = 2 * time.Millisecond

func main() {
	key := flag.String("key", "", "the session API key the server accepts (empty: no auth)")
	maxQueued := flag.Int("max-queued-frames", 1<<16, "frames a socket may have queued before it is dropped as slow")
	maxFrame := flag.Int("max-frame-bytes", 0, "the largest frame the session socket sends (0: the stub's default, 4 MiB)")
	writeTimeout := flag.Duration("write-timeout", 0, "bounds every socket write (0: the stub's default, 5 s)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, oh.Config{
		MaxQueuedFrames: *maxQueued, MaxQueuedBytes: 1 << 30, MaxFrameBytes: *maxFrame, WriteTimeout: *writeTimeout,
	}, *key, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ohstub:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg oh.Config, key string, in io.Reader, out io.Writer) error {
	if key != "" {
		cfg.SessionAPIKeys = []string{key}
	}
	server, err := oh.NewServer(cfg)
	if err != nil {
		return err
	}
	defer server.Close()
	fmt.Fprintln(out, "listening", server.URL())
	s := &stub{server: server}
	lines := make(chan string)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(in)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			reply, err := s.do(ctx, strings.Fields(line))
			if err != nil {
				reply = "error " + err.Error()
			}
			fmt.Fprintln(out, reply)
		}
	}
}

// stub is the server and the conversations it was told to create.
type stub struct {
	server *oh.Server
	convs  []*conv
}

// conv is one conversation and the tool call it has open.
type conv struct {
	*oh.Conversation
	action oh.Event // the action awaiting its observation; nil for none
}

// next appends the conversation's next tool event.
func (c *conv) next() error {
	ev := oh.TerminalAction("ls")
	if c.action != nil {
		ev = oh.ObservationEvent(c.action, "README.md", false)
	}
	ev["timestamp"] = oh.FormatTimestamp(time.Now().UTC())
	appended, err := c.Append(ev)
	if err != nil {
		return fmt.Errorf("append to %s: %w", c.ID(), err)
	}
	if c.action == nil {
		c.action = appended
	} else {
		c.action = nil
	}
	return nil
}

func (s *stub) do(ctx context.Context, args []string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("empty command")
	}
	switch {
	case args[0] == "create" && (len(args) == 2 || len(args) == 3):
		n, err := positiveArg(args, "count")
		if err != nil {
			return "", err
		}
		status := oh.StatusRunning
		if len(args) == 3 {
			status = args[2]
		}
		return s.create(n, status)
	case args[0] == "load" && len(args) == 3:
		rate, err := strconv.ParseFloat(args[1], 64)
		if err != nil || rate <= 0 {
			return "", fmt.Errorf("load: %q is not a positive rate", args[1])
		}
		d, err := time.ParseDuration(args[2])
		if err != nil {
			return "", fmt.Errorf("load: %w", err)
		}
		n, err := s.load(ctx, rate, d)
		return fmt.Sprintf("done %d", n), err
	case args[0] == "touch" && len(args) == 2:
		return "done 1", s.touch(args[1])
	case args[0] == "requests" && len(args) == 1:
		return s.requests(), nil
	case (args[0] == "burst" || args[0] == "large") && len(args) == 2:
		n, err := positiveArg(args, "number")
		if err != nil {
			return "", err
		}
		send := s.burst // n events per conversation
		if args[0] == "large" {
			send = s.large // one event of n bytes per conversation
		}
		total, err := send(n)
		return fmt.Sprintf("done %d", total), err
	}
	return "", fmt.Errorf("unknown command %q", strings.Join(args, " "))
}

// positiveArg reads a command's first argument, a positive integer.
func positiveArg(args []string, what string) (int, error) {
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: %q is not a positive %s", args[0], args[1], what)
	}
	return n, nil
}

// touch appends the next tool event of the conversation id.
func (s *stub) touch(id string) error {
	for _, c := range s.convs {
		if c.ID() == id {
			return c.next()
		}
	}
	return fmt.Errorf("touch: no conversation %s", id)
}

// requests counts the REST GETs served so far by path, a conversation id
// in it written {id}.
func (s *stub) requests() string {
	counts := map[string]int{}
	for _, r := range s.server.Requests() {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.Path, "/api/") {
			continue
		}
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if len(p) == 36 && strings.Count(p, "-") == 4 { // the server's conversation ids
				parts[i] = "{id}"
			}
		}
		counts[strings.Join(parts, "/")]++
	}
	out := []string{"requests"}
	for _, path := range slices.Sorted(maps.Keys(counts)) {
		out = append(out, fmt.Sprintf("%s=%d", path, counts[path]))
	}
	return strings.Join(out, " ")
}

func (s *stub) create(n int, status string) (string, error) {
	ids := make([]string, 0, n)
	for range n {
		c, err := s.server.CreateConversation(oh.ConversationOptions{})
		if err != nil {
			return "", err
		}
		if status != oh.StatusIdle {
			if _, err := c.SetStatus(status); err != nil {
				return "", fmt.Errorf("set the status of %s: %w", c.ID(), err)
			}
		}
		s.convs = append(s.convs, &conv{Conversation: c})
		ids = append(ids, c.ID())
	}
	return "created " + strings.Join(ids, " "), nil
}

// load appends events round robin over every conversation so that, at
// each pace tick, as many have been appended as rate says are due.
func (s *stub) load(ctx context.Context, rate float64, d time.Duration) (int, error) {
	if len(s.convs) == 0 {
		return 0, errors.New("load: no conversations")
	}
	ticker := time.NewTicker(pace)
	defer ticker.Stop()
	start, reset := time.Now(), time.Now()
	appended, turn := 0, 0
	for {
		elapsed := time.Since(start)
		if elapsed >= d {
			elapsed = d
		}
		for due := int(rate * elapsed.Seconds()); appended < due; appended++ {
			if err := s.convs[turn].next(); err != nil {
				return appended, err
			}
			turn = (turn + 1) % len(s.convs)
		}
		if elapsed == d {
			return appended, nil
		}
		if time.Since(reset) >= time.Second {
			s.server.ResetRecording() // the request log is not the benchmark's
			reset = time.Now()
		}
		select {
		case <-ctx.Done():
			return appended, ctx.Err()
		case <-ticker.C:
		}
	}
}

// burst appends n events to every conversation, one goroutine each.
func (s *stub) burst(n int) (int, error) {
	s.server.ResetRecording()
	errs := make([]error, len(s.convs))
	var wg sync.WaitGroup
	for i, c := range s.convs {
		wg.Go(func() {
			for range n {
				if errs[i] = c.next(); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return n * len(s.convs), errors.Join(errs...)
}

// large appends one agent message of about size bytes to every
// conversation at once, each from its own goroutine.
func (s *stub) large(size int) (int, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(s.convs))
	for i, c := range s.convs {
		wg.Go(func() {
			_, errs[i] = c.AppendJSON(oh.OversizeFrame(size))
		})
	}
	wg.Wait()
	return len(s.convs), errors.Join(errs...)
}
