package aepconnector

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"
)

// TestModelCallUsage: a record of one model call (gen_ai.operation.name
// chat and the like) reports its tokens under its operation and model, and
// its cost as reported, else at its model's price; a record that is no
// model call, and a run's events, report nothing of their own.
func TestModelCallUsage(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Prices = usage.Prices{
		"priced":         {Input: 2, CachedInput: ptr(0.5), Output: 8},
		"no-cache-price": {Input: 2, Output: 8},
	}
	at := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	event := func(typ, run string, data map[string]any) *aep.Event {
		return &aep.Event{
			AEP: aep.Version, ID: "e-" + typ, Type: typ, Time: at.Format(time.RFC3339Nano),
			Source: "aep://test/agent/a/session/s", Agent: "a", Session: "s", Run: run, Seq: aep.Int64(0), Data: data,
		}
	}
	call := func(model string, extra map[string]any) map[string]any {
		data := map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
			"gen_ai.usage.input_tokens": 1_000_000, "gen_ai.usage.output_tokens": 500_000,
			"gen_ai.usage.cache_read.input_tokens": 250_000}
		for k, v := range extra {
			data[k] = v
		}
		return data
	}
	const (
		tokensIn  = "gen_ai.client.token.usage{gen_ai.agent.name=a gen_ai.operation.name=chat gen_ai.request.model=%s gen_ai.token.type=input} {token} count=1 sum=1e+06"
		tokensOut = "gen_ai.client.token.usage{gen_ai.agent.name=a gen_ai.operation.name=chat gen_ai.request.model=%s gen_ai.token.type=output} {token} count=1 sum=500000"
	)
	for _, tc := range []struct {
		name string
		ev   *aep.Event
		want []string // the usage and cost lines of the rendered metrics
	}{
		{name: "priced: cached input at the cached price",
			ev: event("x.v.otel.inference", "", call("priced", nil)),
			want: []string{
				"aep.run.cost{aep.cost.currency=USD gen_ai.agent.name=a gen_ai.operation.name=chat gen_ai.request.model=priced}  sum=5.625",
				fmt.Sprintf(tokensIn, "priced"), fmt.Sprintf(tokensOut, "priced"),
			}},
		{name: "no cached price: cached input at the input price",
			ev: event("x.v.otel.inference", "", call("no-cache-price", nil)),
			want: []string{
				"aep.run.cost{aep.cost.currency=USD gen_ai.agent.name=a gen_ai.operation.name=chat gen_ai.request.model=no-cache-price}  sum=6",
				fmt.Sprintf(tokensIn, "no-cache-price"), fmt.Sprintf(tokensOut, "no-cache-price"),
			}},
		{name: "a reported cost wins over the price",
			ev: event("x.v.otel.inference", "", call("priced", map[string]any{"cost": map[string]any{"currency": "EUR", "total": 1.5}})),
			want: []string{
				"aep.run.cost{aep.cost.currency=EUR gen_ai.agent.name=a gen_ai.operation.name=chat gen_ai.request.model=priced}  sum=1.5",
				fmt.Sprintf(tokensIn, "priced"), fmt.Sprintf(tokensOut, "priced"),
			}},
		{name: "a model without a price: tokens, no cost",
			ev:   event("x.v.otel.inference", "", call("unpriced", nil)),
			want: []string{fmt.Sprintf(tokensIn, "unpriced"), fmt.Sprintf(tokensOut, "unpriced")}},
		{name: "usage without a model call's operation (a turn's total) is not counted",
			ev: event("x.v.otel.agent.turn", "", map[string]any{"gen_ai.request.model": "priced",
				"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5})},
		{name: "a run's event is never a model call of its own",
			ev: event("run.started", "r1", call("priced", nil))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, cfg)
			h.feed(t, tc.ev)
			var got []string
			for _, line := range strings.Split(strings.TrimSuffix(renderMetrics(h.points.AllMetrics()), "\n"), "\n") {
				if line != "" && !strings.HasPrefix(line, "aep.events") {
					got = append(got, line)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
