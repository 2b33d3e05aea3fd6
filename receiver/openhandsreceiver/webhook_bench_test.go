package openhandsreceiver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// firstEvents signals, per session, the first AEP event mapped from a
// vendor event.
type firstEvents struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

func (f *firstEvents) wait(session string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.waiting[session] = ch
	return ch
}

func (f *firstEvents) consume(_ context.Context, logs plog.Logs) error {
	for _, rl := range logs.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				ev, err := projection.FromLogRecord(lr, rl.Resource())
				if err != nil || ev.Data["vendor_event_id"] == nil {
					continue
				}
				f.mu.Lock()
				if ch, ok := f.waiting[ev.Session]; ok {
					close(ch)
					delete(f.waiting, ev.Session)
				}
				f.mu.Unlock()
			}
		}
	}
	return nil
}

// BenchmarkTimeToFirstEvent measures, for a conversation started while the
// receiver runs, the time from its first event to that event's AEP event:
// found by search polling (poll_interval 1s: on average half of it) or
// announced by the webhook (its ConversationInfo, posted at start).
//
//	go test -run '^$' -bench TimeToFirstEvent ./receiver/openhandsreceiver/
func BenchmarkTimeToFirstEvent(b *testing.B) {
	for _, mode := range []string{"poll", "push"} {
		b.Run(mode, func(b *testing.B) {
			front := startHookFront(b)
			stubCfg := oh.Config{SessionAPIKeys: []string{testKey}}
			if mode == "push" {
				stubCfg.Webhooks = []oh.WebhookSpec{{BaseURL: front.url, NumRetries: 3, RetryDelay: 10 * time.Millisecond}}
			}
			stub := oh.Start(b, stubCfg)
			cfg := fastConfig(socketSession, stub)
			cfg.PollInterval = time.Second
			if mode == "push" {
				cfg = webhookConfig(socketSession, []string{testKey}, stub)
				cfg.PollInterval = time.Second
			}
			first := &firstEvents{waiting: map[string]chan struct{}{}}
			next, err := consumer.NewLogs(first.consume)
			require.NoError(b, err)
			r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(componentType), cfg, next)
			require.NoError(b, err)
			require.NoError(b, r.Start(context.Background(), componenttest.NewNopHost()))
			b.Cleanup(func() { require.NoError(b, r.Shutdown(context.Background())) })
			if sink := r.(*openhandsReceiver).webhook; sink != nil {
				front.target.Store(sinkURL(sink))
			}
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				conv, err := stub.CreateConversation(oh.ConversationOptions{})
				require.NoError(b, err)
				seen := first.wait(conv.ID())
				start := time.Now()
				_, err = conv.Append(oh.MessageEvent("user", "hello"))
				require.NoError(b, err)
				select {
				case <-seen:
				case <-time.After(waitFor):
					b.Fatal("no AEP event for the conversation's first event")
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/first-event")
		})
	}
}
