package crashtest

import (
	"testing"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// policyOn puts the aeppolicy processor, its state on file_storage, in
// the pipeline of the collector collectorConfig describes: a session may
// cost 10 cents before a notice, 30 before a hard breach.
const policyOn = `
processors:
  aeppolicy:
    default:
      session:
        cost_usd: {soft: 0.1, hard: 0.3}
    storage: file_storage
    check_interval: 100ms
service:
  pipelines:
    logs:
      processors: [aeppolicy]
`

// TestKill9Policy kills the collector after a session crossed its soft
// budget: the next process keeps the session's total and the fired
// breach, so the runs after the restart fire only the hard breach, once,
// and the relay sees each breach once and no broken rule.
func TestKill9Policy(t *testing.T) {
	bin := collectorBinary(t)
	r := newRig(t, setup{socket: "session", queue: noQueue})
	policy := r.writeConfig(t, "policy.yaml", policyOn)
	conv, err := r.stub.CreateConversation(oh.ConversationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	col := startCollector(t, bin, r.logFile, r.config, policy)
	defer func() { col.stop() }()
	r.awaitOutput(t, conv)

	spent := 0.0
	run := func(cost float64) { // one run whose stats grow by cost
		t.Helper()
		spent += cost
		if _, err := conv.SetStatus(oh.StatusRunning); err != nil {
			t.Fatal(err)
		}
		if _, err := conv.SetState("stats", map[string]any{"usage_to_metrics": map[string]any{"agent": map[string]any{
			"model_name": "openai/fake", "accumulated_cost": spent,
			"accumulated_token_usage": map[string]any{"model": "openai/fake", "prompt_tokens": 1000, "completion_tokens": 100},
		}}}); err != nil {
			t.Fatal(err)
		}
		if err := conv.FinishRun(oh.StatusFinished); err != nil {
			t.Fatal(err)
		}
	}
	run(0.15)
	awaitGuardrails(t, r.relay, 1)
	col.kill9(t)
	col = startCollector(t, bin, r.logFile, r.config, policy)
	r.awaitOutput(t, conv)
	run(0.05) // 0.20: under hard, and soft fired before the restart
	run(0.15) // 0.35: hard
	guardrails := awaitGuardrails(t, r.relay, 2)
	settle(r.relay)
	if again := guardrailsAt(r.relay); len(again) != 2 {
		t.Errorf("%d guardrail events at the relay, want 2 (soft, then hard)", len(again))
	}
	for i, level := range []aep.Severity{aep.SeverityWarning, aep.SeverityError} {
		if guardrails[i].Severity != level {
			t.Errorf("guardrail %d is %s, want %s", i, guardrails[i].Severity, level)
		}
	}
	for _, v := range r.relay.Violations() {
		t.Errorf("relay: %s", v)
	}
}

// guardrailsAt are the guardrail events the relay admitted, in arrival
// order.
func guardrailsAt(relay *aeprelaytest.Relay) []*aep.Event {
	var out []*aep.Event
	for _, rec := range relay.Events() {
		if rec.Event.Type == "assessment.guardrail.recorded" {
			out = append(out, rec.Event)
		}
	}
	return out
}

func awaitGuardrails(t *testing.T, relay *aeprelaytest.Relay, n int) []*aep.Event {
	t.Helper()
	relay.Await(t, "guardrail events at the relay", func(relay *aeprelaytest.Relay) bool {
		return len(guardrailsAt(relay)) >= n
	})
	return guardrailsAt(relay)
}
