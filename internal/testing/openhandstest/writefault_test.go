package openhandstest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteFault(t *testing.T) {
	s := Start(t, Config{SessionAPIKeys: []string{testKey}})
	api := newAPIClient(t, s, testKey)
	c := newConversation(t, s, ConversationOptions{Status: StatusRunning})
	pause := "/api/conversations/" + c.ID() + "/pause"

	s.SetWriteFault(WriteFault{Status: http.StatusServiceUnavailable, Detail: "dormant"})
	status, body := api.do("POST", pause, nil)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.JSONEq(t, `{"detail":"dormant"}`, string(body))
	assert.Equal(t, StatusRunning, c.Status(), "a faulted write does not act")
	status, _ = api.do("GET", "/api/conversations/"+c.ID(), nil)
	assert.Equal(t, http.StatusOK, status, "reads are never faulted")

	s.SetWriteFault(WriteFault{Delay: 100 * time.Millisecond})
	start := time.Now()
	status, _ = api.do("POST", pause, nil)
	require.Equal(t, http.StatusOK, status)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	assert.Equal(t, StatusPaused, c.Status(), "a delayed write still acts")

	s.SetWriteFault(WriteFault{AnswerDelay: time.Minute})
	ctx, giveUp := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/api/conversations/"+c.ID()+"/run", http.NoBody)
	require.NoError(t, err)
	req.Header.Set("X-Session-API-Key", testKey)
	answered := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	require.Eventually(t, func() bool { return c.Status() == StatusRunning }, waitTimeout, 5*time.Millisecond,
		"a write whose answer is held acts at once")
	select {
	case err := <-answered:
		t.Fatalf("answered before AnswerDelay (%v)", err)
	default:
	}
	giveUp()
	assert.ErrorIs(t, <-answered, context.Canceled, "a client that gives up never learns it acted")

	s.SetWriteFault(WriteFault{})
	status, _ = api.do("POST", pause, nil)
	assert.Equal(t, http.StatusOK, status)
}
