package openhandsreceiver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// listingServer is a large (or hostile) agent server: search lists total
// conversations, each item padded to the size of a real ConversationInfo
// (its agent JSON and stats), and every socket is accepted and left
// silent. It counts search rounds and open sockets.
type listingServer struct {
	*httptest.Server
	rounds, sockets atomic.Int64
}

func startListingServer(tb testing.TB, total, itemBytes int) *listingServer {
	s := &listingServer{}
	padding := strings.Repeat("x", itemBytes)
	id := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i) }
	info := func(i int) string {
		return `{"id":"` + id(i) + `","execution_status":"running","created_at":"2026-12-01T00:00:00Z","updated_at":"2026-12-01T00:00:00Z","title":"` + padding + `"}`
	}
	upgrader := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/conversations/search", func(w http.ResponseWriter, r *http.Request) {
		start, _ := strconv.Atoi(r.URL.Query().Get("page_id"))
		if start == 0 {
			s.rounds.Add(1)
		}
		var page bytes.Buffer
		page.WriteString(`{"items":[`)
		end := min(start+100, total)
		for i := start; i < end; i++ {
			if i > start {
				page.WriteByte(',')
			}
			page.WriteString(info(i))
		}
		page.WriteString(`],"next_page_id":`)
		if end < total {
			page.WriteString(strconv.Quote(strconv.Itoa(end)))
		} else {
			page.WriteString("null")
		}
		page.WriteByte('}')
		_, _ = w.Write(page.Bytes())
	})
	mux.HandleFunc("GET /api/conversations/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":"` + r.PathValue("id") + `","execution_status":"running","updated_at":"2026-12-01T00:00:00Z"}`))
	})
	mux.HandleFunc("GET /sockets/session/{id}", func(w http.ResponseWriter, r *http.Request) {
		conn, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		s.sockets.Add(1)
		defer s.sockets.Add(-1)
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	})
	s.Server = httptest.NewServer(mux)
	tb.Cleanup(s.Close)
	return s
}

// BenchmarkDiscoveryMemory runs a receiver against a server listing a
// million conversations (4 KiB each as served) for a few discovery
// rounds, once at max_conversations 100 and once at the default, and
// reports the peak Go heap in use and the process's peak RSS. The process
// also runs the server's side of every socket, so both are upper bounds
// for the receiver. Run it alone:
//
//	go test -run '^$' -bench DiscoveryMemory -benchtime 1x ./receiver/openhandsreceiver/
func BenchmarkDiscoveryMemory(b *testing.B) {
	const listed, itemBytes, rounds = 1_000_000, 4 << 10, 5
	for _, maxConversations := range []int{100, defaultMaxConversations} {
		b.Run(fmt.Sprintf("listed=%d/max_conversations=%d", listed, maxConversations), func(b *testing.B) {
			for b.Loop() {
				server := startListingServer(b, listed, itemBytes)
				resetPeakRSS(b)
				var peakHeap atomic.Uint64
				stopSampling := sampleHeap(&peakHeap)
				cfg := createDefaultConfig().(*Config)
				cfg.Servers = []ServerConfig{{Socket: socketSession, MaxConversations: maxConversations}}
				cfg.Servers[0].Endpoint = server.URL
				cfg.PollInterval = 100 * time.Millisecond
				r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(componentType), cfg, consumertest.NewNop())
				require.NoError(b, err)
				require.NoError(b, r.Start(context.Background(), componenttest.NewNopHost()))
				deadline := time.Now().Add(10 * time.Minute)
				for server.rounds.Load() < rounds || server.sockets.Load() < int64(maxConversations) {
					require.True(b, time.Now().Before(deadline), "rounds %d, sockets %d", server.rounds.Load(), server.sockets.Load())
					time.Sleep(50 * time.Millisecond)
				}
				stopSampling()
				b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(peakRSS(b))/(1<<10), "peak-RSS-MiB")
				require.NoError(b, r.Shutdown(context.Background()))
			}
		})
	}
}

// sampleHeap keeps the largest HeapInuse seen in peak until stopped.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// resetPeakRSS restarts the kernel's peak RSS count (VmHWM) from the
// current RSS, as far as the platform allows.
func resetPeakRSS(b *testing.B) {
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("peak RSS cannot be reset (%v): it counts from the process start", err)
	}
}

// peakRSS is VmHWM in KiB, 0 where /proc is not there.
func peakRSS(b *testing.B) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(b, err)
			return kb
		}
	}
	return 0
}
