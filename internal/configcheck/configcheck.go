// Package configcheck holds the checks our components' Validate methods
// share: durations, which the code that reads them takes as "none" when
// negative (a -5s timeout is no timeout), so a sign slip must fail
// validation, naming its key.
package configcheck // import "github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
)

// Duration is one duration key of a configuration.
type Duration struct {
	// Key is the full key, e.g. "servers[1].timeout".
	Key   string
	Value time.Duration
	// Positive also refuses zero.
	Positive bool
}

// Check returns an error naming the key of each duration out of range.
func Check(durations ...Duration) []error {
	var errs []error
	for _, d := range durations {
		switch {
		case d.Positive && d.Value <= 0:
			errs = append(errs, fmt.Errorf("%s: must be positive, got %s", d.Key, d.Value))
		case d.Value < 0:
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", d.Key, d.Value))
		}
	}
	return errs
}

// HTTPClientDurations are the durations of a confighttp client other than
// timeout (whose range is the component's to decide), keyed under prefix
// ("" at the top level, "servers[1]." for a list item). The collector's
// own validation lets them through negative.
func HTTPClientDurations(prefix string, c *confighttp.ClientConfig) []Duration {
	ds := []Duration{
		{Key: prefix + "http2_read_idle_timeout", Value: c.HTTP2ReadIdleTimeout},
		{Key: prefix + "http2_ping_timeout", Value: c.HTTP2PingTimeout},
		{Key: prefix + "tls.reload_interval", Value: c.TLS.ReloadInterval},
	}
	if c.Keepalive.HasValue() {
		ds = append(ds, Duration{Key: prefix + "keepalive.idle_conn_timeout", Value: c.Keepalive.Get().IdleConnTimeout})
	}
	return ds
}
