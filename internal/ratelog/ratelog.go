// Package ratelog keeps a misbehaving peer from flooding the collector's log:
// each distinct cause is logged at most once per interval, and the next line
// for that cause says how many were suppressed in between.
package ratelog // import "github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Logger wraps a zap logger with per-cause rate limiting. Safe for
// concurrent use.
type Logger struct {
	logger *zap.Logger
	every  time.Duration
	now    func() time.Time

	mu     sync.Mutex
	causes map[string]*causeState
}

type causeState struct {
	last       time.Time
	suppressed int
}

// maxCauses bounds the memory a peer inventing causes could take; past it
// the table starts over (worst case: a few extra log lines).
const maxCauses = 4096

// New returns a Logger that logs each cause at most once per every.
func New(logger *zap.Logger, every time.Duration) *Logger {
	return &Logger{logger: logger, every: every, now: time.Now, causes: make(map[string]*causeState)}
}

// Error logs msg at error level unless cause was logged less than the
// interval ago.
func (l *Logger) Error(cause, msg string, fields ...zap.Field) {
	if f, ok := l.allow(cause); ok {
		l.logger.Error(msg, append(fields, f...)...)
	}
}

// Warn is Error at warn level.
func (l *Logger) Warn(cause, msg string, fields ...zap.Field) {
	if f, ok := l.allow(cause); ok {
		l.logger.Warn(msg, append(fields, f...)...)
	}
}

// Info is Error at info level.
func (l *Logger) Info(cause, msg string, fields ...zap.Field) {
	if f, ok := l.allow(cause); ok {
		l.logger.Info(msg, append(fields, f...)...)
	}
}

func (l *Logger) allow(cause string) ([]zap.Field, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	st, ok := l.causes[cause]
	if !ok {
		if len(l.causes) >= maxCauses {
			clear(l.causes)
		}
		l.causes[cause] = &causeState{last: now}
		return nil, true
	}
	if now.Sub(st.last) < l.every {
		st.suppressed++
		return nil, false
	}
	var fields []zap.Field
	if st.suppressed > 0 {
		fields = append(fields, zap.Int("suppressed_since_last", st.suppressed))
	}
	st.last, st.suppressed = now, 0
	return fields, true
}
