package aeprelaytest

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Config configures a relay. The zero value is a tokenless (watch-only)
// relay on a random loopback port with the reference relay's limits.
type Config struct {
	// Addr is the host:port to listen on (default "127.0.0.1:0": a random
	// loopback port, kept across Restart).
	Addr string
	// Token is the single bearer token (the reference AEP_TOKEN), taken
	// from `Authorization: Bearer` or the `access_token` query parameter.
	// Empty authorizes every request but makes the relay watch-only: every
	// command is refused `unauthorized` and never routed.
	Token string
	// MaxBody bounds a POST body and an inbound socket frame (default
	// 16 MiB, AEP_MAX_BODY).
	MaxBody int64
	// MaxBatch bounds the Events of one NDJSON POST (default 10 000,
	// AEP_MAX_BATCH).
	MaxBatch int
	// BufferPerSession is the replay buffer depth of each (source,
	// session) (default 10 000, AEP_BUFFER).
	BufferPerSession int
	// MaxSessions bounds the buffered sessions; the least recently written
	// one is evicted (default 500, AEP_MAX_SESSIONS).
	MaxSessions int
	// MaxFrom bounds the resume positions of one subscription (default
	// MaxSessions, as AEP_MAX_FROM).
	MaxFrom int
	// MaxSubscriptions bounds the subscriptions of one socket (default 64).
	MaxSubscriptions int
	// MaxQueued is how many live frames may wait for a slow consumer before
	// it is disconnected (default 4096). Replay never counts against it.
	MaxQueued int
	// MaxRecords bounds each record list (Events, Violations, Hellos,
	// Frames, Commands); the oldest entries are dropped (default 100 000).
	MaxRecords int
	// HelloTimeout is how long a socket may take to send its hello; one
	// that has not is dropped (default 10 s).
	HelloTimeout time.Duration
	// WriteTimeout bounds every socket and SSE write (default 5 s).
	WriteTimeout time.Duration
	// PingInterval makes the relay ping every socket that completed hello
	// at this interval; 0 (the default) never pings.
	PingInterval time.Duration
	// PongTimeout drops a socket whose pong has not arrived this long after
	// the relay's ping (default 3 × PingInterval).
	PongTimeout time.Duration
	// Heartbeat is the interval of SSE `: ping` comments (default 30 s).
	Heartbeat time.Duration
	// DrainTimeout bounds the orderly part of Close and Restart; what is
	// still open afterwards is dropped (default 5 s).
	DrainTimeout time.Duration
	// Logger receives the relay's log; nil discards it. Tokens are never
	// logged.
	Logger *slog.Logger
	// Refuse, when set, is an admission policy stricter than the schema,
	// like another relay implementation's: an Event it returns an error
	// for is refused on every binding as invalid-event, exactly like one
	// that fails validation, but is not recorded as a violation.
	Refuse func(*aep.Event) error
}

// Defaults of the reference relay (docs/components/relay.md).
const (
	defaultMaxBody          = 16 << 20
	defaultMaxBatch         = 10000
	defaultBufferPerSession = 10000
	defaultMaxSessions      = 500
)

func (c Config) withDefaults() (Config, error) {
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"MaxBody", c.MaxBody < 0}, {"MaxBatch", c.MaxBatch < 0},
		{"BufferPerSession", c.BufferPerSession < 0}, {"MaxSessions", c.MaxSessions < 0},
		{"MaxFrom", c.MaxFrom < 0}, {"MaxSubscriptions", c.MaxSubscriptions < 0},
		{"MaxQueued", c.MaxQueued < 0}, {"MaxRecords", c.MaxRecords < 0},
		{"HelloTimeout", c.HelloTimeout < 0}, {"WriteTimeout", c.WriteTimeout < 0},
		{"PingInterval", c.PingInterval < 0}, {"PongTimeout", c.PongTimeout < 0},
		{"Heartbeat", c.Heartbeat < 0}, {"DrainTimeout", c.DrainTimeout < 0},
	} {
		if f.bad {
			return c, fmt.Errorf("aeprelaytest config: %s must not be negative", f.name)
		}
	}
	setDefault(&c.Addr, "127.0.0.1:0")
	setDefault(&c.MaxBody, defaultMaxBody)
	setDefault(&c.MaxBatch, defaultMaxBatch)
	setDefault(&c.BufferPerSession, defaultBufferPerSession)
	setDefault(&c.MaxSessions, defaultMaxSessions)
	setDefault(&c.MaxFrom, c.MaxSessions)
	setDefault(&c.MaxSubscriptions, 64)
	setDefault(&c.MaxQueued, 4096)
	setDefault(&c.MaxRecords, 100000)
	setDefault(&c.HelloTimeout, 10*time.Second)
	setDefault(&c.WriteTimeout, 5*time.Second)
	setDefault(&c.PongTimeout, 3*c.PingInterval)
	setDefault(&c.Heartbeat, 30*time.Second)
	setDefault(&c.DrainTimeout, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// PongMode says how the relay answers pings: AEP `ping` frames and
// WebSocket ping control frames alike. The zero value answers at once.
type PongMode struct {
	// Never leaves every ping unanswered, like a hung relay.
	Never bool
	// Delay holds each answer back this long.
	Delay time.Duration
	// Agent, when set, applies the mode only to the sockets whose hello
	// names this agent; the others answer at once.
	Agent string
}

// RestartMode says what a Restart keeps.
type RestartMode int

const (
	// KeepState keeps buffers, dedupe, stream-checker state and records,
	// like a relay that survived a network blip.
	KeepState RestartMode = iota
	// ClearState starts empty, like a fresh relay process: buffers, dedupe,
	// stream-checker state and every record are cleared.
	ClearState
)
