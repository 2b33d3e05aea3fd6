package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// relayWatch is a consumer of the relay's SSE stream: every tool event
// that arrives is an arrival of the pipeline under test, timed from its
// data.vendor_ts; state.snapshot marks a conversation as attached, and
// session.started, session.ended and tool.requested are marked likewise.
type relayWatch struct {
	rec *recorder

	mu     sync.Mutex
	marked map[string]map[string]bool // type → session → seen
	total  int
	err    error
}

// markedTypes are the event types the watch marks per session.
var markedTypes = []string{"state.snapshot", "session.started", "session.ended", "tool.requested"}

func watchRelay(ctx context.Context, relayURL, token string) (*relayWatch, error) {
	u, err := url.Parse(relayURL)
	if err != nil {
		return nil, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/stream"
	u.RawQuery = url.Values{"access_token": {token}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("subscribe to the relay: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("subscribe to the relay: HTTP %d", resp.StatusCode)
	}
	w := &relayWatch{rec: &recorder{}, marked: map[string]map[string]bool{}}
	for _, typ := range markedTypes {
		w.marked[typ] = map[string]bool{}
	}
	go func() {
		defer resp.Body.Close()
		scanner := bufio.NewScanner(resp.Body)
		scanner.Buffer(nil, 16<<20)
		for scanner.Scan() {
			if data, ok := bytes.CutPrefix(scanner.Bytes(), []byte("data: ")); ok {
				w.event(data)
			}
		}
		w.mu.Lock()
		w.err = fmt.Errorf("the relay stream ended: %v", scanner.Err())
		w.mu.Unlock()
	}()
	return w, nil
}

func (w *relayWatch) event(data []byte) {
	var ev struct {
		Type    string `json:"type"`
		Session string `json:"session"`
		Data    struct {
			VendorTS string `json:"vendor_ts"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	if w.marked[ev.Type] != nil {
		w.mu.Lock()
		w.marked[ev.Type][ev.Session] = true
		w.mu.Unlock()
	}
	if strings.HasPrefix(ev.Type, "tool.") && ev.Data.VendorTS != "" {
		w.rec.addVendor(ev.Data.VendorTS)
		w.mu.Lock()
		w.total++
		w.mu.Unlock()
	}
}

// attachedCount is how many of ids have their snapshot at the relay.
func (w *relayWatch) attachedCount(ids []string) int { return w.markedCount("state.snapshot", ids) }

// markedCount is how many of ids have an event of type typ (one of
// markedTypes) at the relay.
func (w *relayWatch) markedCount(typ string, ids []string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, id := range ids {
		if w.marked[typ][id] {
			n++
		}
	}
	return n
}

// failure is why the stream ended, nil while it runs.
func (w *relayWatch) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// delivered is every tool event seen since the watch began.
func (w *relayWatch) delivered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}
