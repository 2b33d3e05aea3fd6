package aeprelaytest

import (
	"fmt"
	"testing"
)

// BenchmarkIngest measures the per-Event cost every binding pays:
// validation, stream checking, buffering and fan-out to one matching
// subscriber.
func BenchmarkIngest(b *testing.B) {
	r := Start(b, Config{BufferPerSession: 1000})
	s := &sseStream{out: newOutbox[sseMessage](1 << 30), killed: make(chan struct{})}
	r.mu.Lock()
	r.streams[s] = struct{}{}
	r.mu.Unlock()
	raws := make([][]byte, b.N)
	for i := range raws {
		raws[i] = []byte(fmt.Sprintf(`{"aep":"0.1","id":"bench-%d","type":"tool.requested","subject":"Bash","time":"2026-07-03T10:00:00Z","source":"aep://host/agent/alpha/session/s1","agent":"alpha","session":"s1","seq":%d,"data":{"tool":{"name":"Bash","call_id":"c%d"}}}`, i, i, i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ev, err := parseEvent(raws[i], nil)
		if err != nil {
			b.Fatal(err)
		}
		r.mu.Lock()
		r.ingestLocked(newIngested(raws[i], ev, BindingPOST, 0), nil)
		r.mu.Unlock()
		if i%1000 == 0 {
			s.out.take()
		}
	}
}
