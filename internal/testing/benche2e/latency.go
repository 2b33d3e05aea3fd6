package main

import (
	"slices"
	"sync"
	"time"
)

// vendorTimeLayout is the stub's naive UTC timestamp at microseconds: the
// moment a vendor event was appended, from which latency is measured.
const vendorTimeLayout = "2006-01-02T15:04:05.000000"

// recorder collects the arrivals of one measurement.
type recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	last      time.Time
}

// add notes an event that was sent at sent and arrives now.
func (r *recorder) add(sent time.Time) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latencies = append(r.latencies, now.Sub(sent))
	r.last = now
}

// addVendor notes an event by its vendor timestamp; an unreadable one is
// counted with no latency.
func (r *recorder) addVendor(ts string) {
	sent, err := time.Parse(vendorTimeLayout, ts)
	if err != nil {
		sent = time.Now()
	}
	r.add(sent)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.latencies)
}

// summary is one measurement's arrivals.
type summary struct {
	Events   int     `json:"events"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	LastUnix int64   `json:"last_unix_nano"`
}

// take summarises and forgets what arrived.
func (r *recorder) take() summary {
	r.mu.Lock()
	lat, last := r.latencies, r.last
	r.latencies, r.last = nil, time.Time{}
	r.mu.Unlock()
	s := summary{Events: len(lat)}
	if !last.IsZero() {
		s.LastUnix = last.UnixNano()
	}
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	s.P50, s.P99 = at(0.50), at(0.99)
	return s
}
