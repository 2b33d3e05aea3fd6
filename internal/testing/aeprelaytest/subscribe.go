package aeprelaytest

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
)

// Subscribe consumes GET /stream?query as an AEP consumer would, with the
// relay's token, until tb ends: each message's data as delivered,
// redeliveries included. The relay counts a stream before it answers 200,
// so what is admitted once Subscribe returns is delivered.
func (r *Relay) Subscribe(tb testing.TB, query string) <-chan []byte {
	tb.Helper()
	r.mu.Lock()
	token := r.token
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/stream?"+query, http.NoBody)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		tb.Fatalf("subscribe to the relay's stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		tb.Fatalf("subscribe to the relay's stream: %s", resp.Status)
	}
	data := make(chan []byte, 64)
	done := make(chan struct{})
	tb.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			line, ok := strings.CutPrefix(lines.Text(), "data: ")
			if !ok {
				continue
			}
			select {
			case data <- []byte(line):
			case <-ctx.Done():
				return
			}
		}
	}()
	return data
}
