package openhandsreceiver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// BenchmarkLargeFramesHeap reports the peak Go heap while 20 conversations
// each receive one 15 MiB frame at once (issue 23: 520 MB), with the
// receiver's frame budget and with none: each conversation's log holds the
// frame when the receiver starts, and all 20 attach and replay it at once.
// The stub agent server runs as its own process (ohstub), so its copies of
// the frames are not counted, and its socket writes wait up to a minute, so
// a socket waiting for the budget is not dropped as a slow consumer. Run it
// with -benchtime=1x.
func BenchmarkLargeFramesHeap(b *testing.B) {
	const conversations, frameBytes = 20, 15 << 20
	bin := filepath.Join(b.TempDir(), "ohstub")
	build := exec.Command("go", "build", "-o", bin, "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest/cmd/ohstub")
	out, err := build.CombinedOutput()
	require.NoError(b, err, "%s", out)
	for _, bc := range []struct {
		name   string
		budget int64
	}{
		{"budget=64MiB", frameBytesInFlight},
		{"unbounded", 1 << 50},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var peak int64
			for b.Loop() {
				peak = largeFramesPeak(b, bin, conversations, frameBytes, bc.budget)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// largeFramesPeak runs one receiver against an ohstub process and returns
// how far the heap rose above its level before the frames were sent.
func largeFramesPeak(b *testing.B, bin string, conversations, frameBytes int, budget int64) int64 {
	stub := startOhstub(b, bin, "-max-frame-bytes", fmt.Sprint(2*frameBytes), "-write-timeout", "1m")
	stub.do(b, fmt.Sprintf("create %d idle", conversations))
	stub.do(b, fmt.Sprintf("large %d", frameBytes))

	cfg := createDefaultConfig().(*Config)
	sc := ServerConfig{Socket: socketSession}
	sc.Endpoint = stub.url
	cfg.Servers = []ServerConfig{sc}
	cfg.PollInterval = 50 * time.Millisecond
	sink := &eventCounter{}
	set := receivertest.NewNopSettings(componentType)
	set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
	set.Logger = zaptest.NewLogger(b, zaptest.Level(zap.WarnLevel))
	r, err := newReceiver(cfg, set, sink)
	require.NoError(b, err)
	r.sockets.frames = newFrameBudget(budget, &r.tel.frameBytesInFlight)

	runtime.GC()
	base := heapObjects()
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			peak.Store(max(peak.Load(), heapObjects()))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	require.NoError(b, r.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(b, r.Shutdown(context.Background())) }()
	sink.wait(b, "dev.aep.x.openhands.message.event", conversations)
	close(stop)
	sampler.Wait()
	return peak.Load() - base
}

func heapObjects() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// eventCounter counts the log records it takes by event name.
type eventCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *eventCounter) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *eventCounter) ConsumeLogs(_ context.Context, logs plog.Logs) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = make(map[string]int)
	}
	for _, rl := range logs.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				c.counts[lr.EventName()]++
			}
		}
	}
	return nil
}

func (c *eventCounter) wait(tb testing.TB, name string, n int) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c.mu.Lock()
		got := c.counts[name]
		c.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d %s records", got, n, name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ohstub is the stub agent server as its own process (cmd/ohstub).
type ohstub struct {
	url   string
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func startOhstub(tb testing.TB, bin string, args ...string) *ohstub {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	tb.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	s := &ohstub{stdin: stdin, lines: bufio.NewScanner(stdout)}
	require.True(tb, s.lines.Scan(), "ohstub started")
	url, ok := strings.CutPrefix(s.lines.Text(), "listening ")
	require.True(tb, ok, s.lines.Text())
	s.url = url
	return s
}

func (s *ohstub) do(tb testing.TB, command string) string {
	tb.Helper()
	_, err := fmt.Fprintln(s.stdin, command)
	require.NoError(tb, err)
	require.True(tb, s.lines.Scan(), "ohstub answers %q", command)
	reply := s.lines.Text()
	require.False(tb, strings.HasPrefix(reply, "error "), reply)
	return reply
}
