package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/cockpit"
)

func TestParams(t *testing.T) {
	dir := t.TempDir()
	params := filepath.Join(dir, "params.json")

	t.Run("retuned", func(t *testing.T) {
		require.NoError(t, os.WriteFile(params, []byte(`{"daily_budget": 250, "attention_wait": "30m"}`), 0o600))
		out := filepath.Join(dir, "retuned")
		require.NoError(t, run(out, params))
		rules, err := os.ReadFile(filepath.Join(out, cockpit.RulesPath))
		require.NoError(t, err)
		assert.Contains(t, string(rules), "gen_ai_agent_name:aep_run_cost:rate1h * 86400 > 1000", "fast burn: 4 daily budgets of 250")
		assert.Contains(t, string(rules), "for: 30m")
		for _, path := range []string{cockpit.AgentsDashboardPath, cockpit.CollectorDashboardPath} {
			assert.FileExists(t, filepath.Join(out, path))
		}
	})
	t.Run("unknown parameter", func(t *testing.T) {
		require.NoError(t, os.WriteFile(params, []byte(`{"daily_budgett": 250}`), 0o600))
		assert.ErrorContains(t, run(filepath.Join(dir, "typo"), params), "daily_budgett")
	})
}
