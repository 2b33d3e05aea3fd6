// Package usage reads what an AEP event reports of token usage and cost,
// and prices the tokens of a model call that reports no cost. The aep
// connector turns it into GenAI metrics; the aeppolicy processor sums it
// against budgets. Both read it here, so a price means one thing.
package usage // import "github.com/otelcol-openhands/otelcol-openhands/internal/aep/usage"

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// The GenAI conventions' names for a run's or a model call's facts, as the
// events carry them in data (AEP-0002 §5.2 for the first two).
const (
	AttrOperationName = "gen_ai.operation.name"
	AttrInputTokens   = "gen_ai.usage.input_tokens"
	AttrOutputTokens  = "gen_ai.usage.output_tokens"
	AttrCachedTokens  = "gen_ai.usage.cache_read.input_tokens"
	AttrRequestModel  = "gen_ai.request.model"

	// CurrencyUSD is the currency of prices: US dollars, as litellm, which
	// prices the openhands receiver's runs, has them.
	CurrencyUSD = "USD"
)

// CostParts are the cost object's numeric fields (AEP-0002 §5.2).
var CostParts = []string{"total", "prompt", "completion", "cache", "reasoning"}

// modelCallOperations are the GenAI conventions' operations of one model
// call (an inference).
var modelCallOperations = []string{"chat", "text_completion", "generate_content"}

// ModelCall reports whether ev is the record of one model call, and its
// operation: data names one of the conventions' inference operations in
// gen_ai.operation.name (the VS Code agent's inference records, Codex's
// completed responses through the aepinbound processor). Run events never
// are: a run's usage is its terminal's.
func ModelCall(ev *aep.Event) (string, bool) {
	op, _ := ev.Data[AttrOperationName].(string)
	if strings.HasPrefix(ev.Type, "run.") || !slices.Contains(modelCallOperations, op) {
		return "", false
	}
	return op, true
}

// ModelPrice is one model's price in US dollars per million tokens.
type ModelPrice struct {
	// Input prices input tokens that were not read from the provider's cache.
	Input float64 `mapstructure:"input"`
	// CachedInput prices input tokens read from the cache; unset, they
	// cost what Input says.
	CachedInput *float64 `mapstructure:"cached_input"`
	// Output prices output tokens, reasoning tokens included.
	Output float64 `mapstructure:"output"`

	_ struct{}
}

// Prices are models' prices, by the gen_ai.request.model the events name.
type Prices map[string]ModelPrice

// Validate checks every price; messages name key[model].field.
func (p Prices) Validate(key string) []error {
	var errs []error
	for _, model := range slices.Sorted(maps.Keys(p)) {
		price := p[model]
		if model == "" {
			errs = append(errs, fmt.Errorf("%s: a model name must not be empty", key))
		}
		for _, f := range []struct {
			key   string
			value *float64
		}{{"input", &price.Input}, {"cached_input", price.CachedInput}, {"output", &price.Output}} {
			if f.value != nil && !(*f.value >= 0 && !math.IsInf(*f.value, 0)) {
				errs = append(errs, fmt.Errorf("%s[%q].%s: must be a non-negative number, got %v", key, model, f.key, *f.value))
			}
		}
	}
	return errs
}

// Cost is the total cost ev reports, else its tokens at the model's price
// when p has it: cached input at the cached price, the rest of the input
// at the input price, output (reasoning included) at the output price.
func (p Prices) Cost(ev *aep.Event) (currency string, total float64, ok bool) {
	if currency, parts := ReportedCost(ev); currency != "" {
		total, ok = parts["total"]
		return currency, total, ok
	}
	model, _ := ev.Data[AttrRequestModel].(string)
	price, priced := p[model]
	input, hasInput := Tokens(ev, AttrInputTokens)
	output, hasOutput := Tokens(ev, AttrOutputTokens)
	if !priced || !hasInput || !hasOutput {
		return "", 0, false
	}
	cached, _ := Tokens(ev, AttrCachedTokens)
	cached = min(cached, input)
	cachedPrice := price.Input
	if price.CachedInput != nil {
		cachedPrice = *price.CachedInput
	}
	perToken := float64(input-cached)*price.Input + float64(cached)*cachedPrice + float64(output)*price.Output
	return CurrencyUSD, perToken / 1e6, true
}

// Tokens reads a gen_ai.usage.* count the event reports.
func Tokens(ev *aep.Event, attr string) (int64, bool) {
	n, ok := Number(ev.Data[attr])
	if !ok || n < 0 {
		return 0, false
	}
	return int64(n), true
}

// ReportedCost reads the cost object: its currency and each numeric part
// present.
func ReportedCost(ev *aep.Event) (currency string, parts map[string]float64) {
	c, ok := ev.Data["cost"].(map[string]any)
	if !ok {
		return "", nil
	}
	currency, _ = c["currency"].(string)
	if currency == "" {
		return "", nil // the schema requires it; a cost without one means nothing
	}
	parts = make(map[string]float64, len(CostParts))
	for _, p := range CostParts {
		if v, ok := Number(c[p]); ok {
			parts[p] = v
		}
	}
	return currency, parts
}

// Number reads a JSON number as the projection's inverse returns it.
func Number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}
