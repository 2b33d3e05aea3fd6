// Package configchecktest pins that a configuration refuses every negative
// duration it holds, and loads components' test configurations.
package configchecktest // import "github.com/otelcol-openhands/otelcol-openhands/internal/configcheck/configchecktest"

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
)

// RejectsNegativeDurations sets each duration of cfg (a valid
// configuration, every optional part present) to -5s in turn, in a subtest
// named after its key, and requires the collector's validation to fail
// with a message naming it: "servers[0].timeout: ...", or, from the
// collector's own nested configs, "retry_on_failure: initial_interval ...".
// It returns the keys it tried.
func RejectsNegativeDurations(t *testing.T, cfg any) []string {
	t.Helper()
	require.NoError(t, confmap.Validate(cfg), "the base configuration must be valid")
	var keys []string
	configcheck.WalkDurations(cfg, func(key string, d *time.Duration) {
		keys = append(keys, key)
		t.Run(key, func(t *testing.T) {
			valid := *d
			defer func() { *d = valid }()
			*d = -5 * time.Second
			err := confmap.Validate(cfg)
			require.Error(t, err)
			ours := key + ": "
			nested := ours
			if i := strings.LastIndex(key, "."); i >= 0 {
				nested = key[:i] + ": " + key[i+1:]
			}
			msg := err.Error()
			assert.True(t, strings.Contains(msg, ours) || strings.Contains(msg, nested), "the message names %s: %s", key, msg)
		})
	})
	return keys
}
