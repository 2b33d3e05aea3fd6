package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a log sink the test reads while run writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listening = regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)`)

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-token", "sesame", "-buffer", "5"}, logs) }()

	var base string
	require.Eventually(t, func() bool {
		m := listening.FindStringSubmatch(logs.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 5*time.Second, 10*time.Millisecond, "no listening line in %q", logs.String())
	assert.NotContains(t, logs.String(), "sesame", "the token is never logged")

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(base + "/healthz")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.JSONEq(t, `{"ok":true}`, string(body))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not drain")
	}
	assert.Contains(t, logs.String(), "AEP relay stopped")
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-buffer", "-1"},
		{"-log-level", "loud"},
		{"extra"},
		{"-nope"},
	} {
		t.Run(args[0], func(t *testing.T) {
			err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, args...), io.Discard)
			assert.Error(t, err)
		})
	}
}
