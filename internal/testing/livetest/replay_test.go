package livetest

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"
)

// recordings is where make record writes.
const recordings = "../../../testdata/recorded"

// TestReplayRecordings serves every recording of the real agent server to
// the receiver at the same socket mode and capture level, and requires the
// AEP stream the receiver emitted live: a drift between the receiver and
// the server, or between the stub's idea of the server and the recording,
// fails here, without Python.
func TestReplayRecordings(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(recordings, "*", "transcript.json.gz"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs, "no recordings under %s (make record)", recordings)
	for _, path := range dirs {
		dir := filepath.Dir(path)
		label := filepath.Base(dir)
		mode, level, ok := strings.Cut(label, "-")
		require.True(t, ok, "recording %s is not named mode-level", label)
		t.Run(label, func(t *testing.T) {
			t.Parallel()
			replay(t, dir, mode, aep.Capture(level))
		})
	}
}

func replay(t *testing.T, dir, mode string, level aep.Capture) {
	r := startReplay(t, dir, mode, level)
	replayer, sink, wantBySession := r.replayer, r.sink, r.want
	if *update {
		// A receiver change that adds to what events say (never one that
		// adds or drops events) is recorded by replaying each transcript.
		awaitReplayed(t, replayer, sink, wantBySession)
		require.NoError(t, SaveStream(filepath.Join(dir, "aep.jsonl.gz"), aeptest.EventsOf(t, sink.AllLogs()...)))
		return
	}
	requireReplayed(t, replayer, sink, wantBySession)
}

// replaying is one recording served to a receiver.
type replaying struct {
	transcript *Transcript
	replayer   *Replayer
	sink       *consumertest.LogsSink
	want       map[string][]string // the recorded stream, normalized
}

// startReplay serves the recording in dir to a receiver in mode at level.
func startReplay(t *testing.T, dir, mode string, level aep.Capture) replaying {
	tr, err := LoadTranscript(filepath.Join(dir, "transcript.json.gz"))
	require.NoError(t, err)
	want, err := LoadStream(filepath.Join(dir, "aep.jsonl.gz"))
	require.NoError(t, err)
	replayer := NewReplayer(tr)
	front, err := StartFront(replayer)
	require.NoError(t, err)
	t.Cleanup(front.Close)
	t.Cleanup(replayer.Close)
	sink := new(consumertest.LogsSink)
	startReceiver(t, ReceiverYAML(mode, level, front.ProxyURL()), sink)
	return replaying{transcript: tr, replayer: replayer, sink: sink, want: want}
}

// update rewrites each recording's aep.jsonl.gz from its replay.
var update = flag.Bool("update", false, "rewrite testdata/recorded/*/aep.jsonl.gz from the replay of each transcript")

// awaitReplayed waits (bounded) until the replay is drained and every
// session has emitted as much as want, and returns what was emitted.
func awaitReplayed(t *testing.T, replayer *Replayer, sink *consumertest.LogsSink, want map[string][]string) map[string][]string {
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := emitted(t, sink)
		if replayer.Drained() && caughtUp(got, want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireReplayed waits for the replay, then requires exactly want.
func requireReplayed(t *testing.T, replayer *Replayer, sink *consumertest.LogsSink, want map[string][]string) {
	got := awaitReplayed(t, replayer, sink, want)
	assert.Empty(t, replayer.Problems(), "requests the recording has no answer for")
	for session, w := range want {
		assert.Equal(t, w, got[session], "session %s", session)
	}
	assert.Len(t, got, len(want), "sessions")
}

// caughtUp reports whether every session has emitted as many events as
// expected.
func caughtUp(got, want map[string][]string) bool {
	for s, w := range want {
		if len(got[s]) < len(w) {
			return false
		}
	}
	return true
}

// emitted is the receiver's output so far, normalized, by session.
func emitted(t *testing.T, sink *consumertest.LogsSink) map[string][]string {
	out, err := Normalize(aeptest.EventsOf(t, sink.AllLogs()...))
	require.NoError(t, err)
	return out
}

// startReceiver runs the openhands receiver with the live test's YAML
// until the test ends or stop is called.
func startReceiver(t *testing.T, config string, sink *consumertest.LogsSink) (stop func()) {
	retrieved, err := confmap.NewRetrievedFromYAML([]byte(config))
	require.NoError(t, err)
	conf, err := retrieved.AsConf()
	require.NoError(t, err)
	f := openhandsreceiver.NewFactory()
	cfg := f.CreateDefaultConfig()
	require.NoError(t, conf.Unmarshal(cfg))
	set := receivertest.NewNopSettings(f.Type())
	set.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	r, err := f.CreateLogs(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	var once sync.Once
	stop = func() { once.Do(func() { require.NoError(t, r.Shutdown(context.Background())) }) }
	t.Cleanup(stop)
	return stop
}
