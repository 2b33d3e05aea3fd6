package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
)

// FsyncPolicy says when written lines are forced to disk.
type FsyncPolicy string

const (
	// FsyncNone leaves flushing to the kernel: a crash of the process loses
	// nothing it wrote, a crash of the machine may lose recent lines.
	FsyncNone FsyncPolicy = "none"
	// FsyncInterval syncs the files written since the last sync every
	// fsync_interval: a machine crash loses at most that much.
	FsyncInterval FsyncPolicy = "interval"
	// FsyncEveryBatch syncs before a push succeeds: a confirmed batch is on
	// disk, so with a persistent queue no crash loses an event.
	FsyncEveryBatch FsyncPolicy = "every_batch"
)

// Config is the aepfile exporter's configuration.
type Config struct {
	// TimeoutConfig bounds one push attempt.
	exporterhelper.TimeoutConfig `mapstructure:",squash"`
	// QueueConfig is exporterhelper's sending queue (num_consumers 1 by
	// default, so each session's lines keep the order they were emitted).
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	// RetryConfig retries pushes that failed on a disk or permission error.
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`

	// Directory is the root of the session logs, created if missing.
	Directory string `mapstructure:"directory"`
	// FileMode and DirMode are the octal permissions of created files and
	// directories (applied exactly, whatever the umask).
	FileMode string `mapstructure:"file_mode"`
	DirMode  string `mapstructure:"dir_mode"`
	// Fsync is none, interval or every_batch.
	Fsync FsyncPolicy `mapstructure:"fsync"`
	// FsyncInterval is the period of the interval policy.
	FsyncInterval time.Duration `mapstructure:"fsync_interval"`
	// MaxOpenFiles bounds the descriptors held; the least recently written
	// file is closed to open another.
	MaxOpenFiles int `mapstructure:"max_open_files"`
	// EndedGrace is how long a session's file stays open after its
	// session.ended, for late redeliveries.
	EndedGrace time.Duration `mapstructure:"ended_grace"`
	// DedupWindow bounds, per open log, the seq ranges (a session written
	// in order is one) and the (source, id) pairs of seq-less events
	// remembered for deduplication; 0 turns it off.
	DedupWindow int `mapstructure:"dedup_window"`
	// MaxCapture, when set, down-levels every event above it before it is
	// written (AEP-0001 §8.2).
	MaxCapture aep.Capture `mapstructure:"max_capture"`
	// RotateBytes, when positive, continues a session's log in its next
	// segment ({session}.1.jsonl, …) before a line would take the current
	// one past this size.
	RotateBytes int64 `mapstructure:"rotate_bytes"`
	// MaxAge, when positive, deletes the logs whose files were all left
	// untouched this long; an open log is never deleted.
	MaxAge time.Duration `mapstructure:"max_age"`
	// CompressEnded gzips an ended session's segments once its log is
	// closed.
	CompressEnded bool `mapstructure:"compress_ended"`

	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the settings this exporter owns; confmap validates the
// nested collector configs (sending_queue, retry_on_failure).
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Directory == "" {
		errs = append(errs, errors.New("directory: must not be empty"))
	}
	for _, m := range [...]struct{ key, value string }{{"file_mode", cfg.FileMode}, {"dir_mode", cfg.DirMode}} {
		if _, err := parseMode(m.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.key, err))
		}
	}
	switch cfg.Fsync {
	case FsyncNone, FsyncInterval, FsyncEveryBatch:
	default:
		errs = append(errs, fmt.Errorf("fsync: must be %q, %q or %q, got %q", FsyncNone, FsyncInterval, FsyncEveryBatch, cfg.Fsync))
	}
	if cfg.Fsync == FsyncInterval && cfg.FsyncInterval <= 0 {
		errs = append(errs, errors.New("fsync_interval: must be positive with fsync: interval"))
	}
	if cfg.MaxOpenFiles < 1 {
		errs = append(errs, fmt.Errorf("max_open_files: must be at least 1, got %d", cfg.MaxOpenFiles))
	}
	if cfg.DedupWindow < 0 {
		errs = append(errs, fmt.Errorf("dedup_window: must not be negative, got %d", cfg.DedupWindow))
	}
	if cfg.RotateBytes < 0 {
		errs = append(errs, fmt.Errorf("rotate_bytes: must not be negative, got %d", cfg.RotateBytes))
	}
	if cfg.MaxCapture != "" && cfg.MaxCapture.Rank() < 0 {
		errs = append(errs, fmt.Errorf("max_capture: unknown level %q (want none, metadata, redacted or full)", cfg.MaxCapture))
	}
	errs = append(errs, configcheck.Check(
		configcheck.Duration{Key: "timeout", Value: cfg.Timeout, Positive: true},
		configcheck.Duration{Key: "ended_grace", Value: cfg.EndedGrace},
		configcheck.Duration{Key: "max_age", Value: cfg.MaxAge})...)
	return errors.Join(errs...)
}

// parseMode reads an octal permission such as "0600". It is a quoted
// string so that its digits are octal whatever YAML makes of a leading 0.
func parseMode(s string) (fs.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("must be an octal permission such as \"0600\", got %q", s)
	}
	return fs.FileMode(m), nil
}
