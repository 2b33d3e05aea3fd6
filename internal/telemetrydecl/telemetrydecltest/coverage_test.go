package telemetrydecltest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryComponentChecksItsREADME: every component that declares
// metrics through telemetrydecl has a test holding its README's metrics
// table to what it registers, so a new component (or a new metric) cannot
// ship with the table out of step.
func TestEveryComponentChecksItsREADME(t *testing.T) {
	components, err := filepath.Glob("../../../*/*/telemetry.go")
	require.NoError(t, err)
	var declaring int
	for _, telemetry := range components {
		source, err := os.ReadFile(telemetry)
		require.NoError(t, err)
		if !strings.Contains(string(source), "telemetrydecl.New(") {
			continue
		}
		declaring++
		dir := filepath.Dir(telemetry)
		tests, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		require.NoError(t, err)
		checked := false
		for _, test := range tests {
			source, err := os.ReadFile(test)
			require.NoError(t, err)
			checked = checked || strings.Contains(string(source), "telemetrydecltest.RequireREADMEMatches(")
		}
		assert.True(t, checked, "%s declares metrics but no test of it calls telemetrydecltest.RequireREADMEMatches", dir)
	}
	require.NotZero(t, declaring, "no component found: the glob no longer matches the layout")
}
