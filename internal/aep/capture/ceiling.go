package capture

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

// ceilingCategories are the keys a configured ceiling may override: the
// registered type categories and x, the whole vendor plane.
var ceilingCategories = append(slices.Clone(schema.Categories), "x")

// CheckCeiling is the one check of a configured capture ceiling: a level
// and per-category overrides keyed by the type's first token. Each error
// names its key under key (e.g. "capture.level").
func CheckCeiling(key string, level aep.Capture, categories map[string]aep.Capture) []error {
	var errs []error
	if level.Rank() < 0 {
		errs = append(errs, fmt.Errorf("%s.level: unknown level %q (want none, metadata, redacted or full)", key, level))
	}
	for _, category := range slices.Sorted(maps.Keys(categories)) {
		if !slices.Contains(ceilingCategories, category) {
			errs = append(errs, fmt.Errorf("%s.categories: unknown category %q (want one of %s)", key, category, strings.Join(ceilingCategories, ", ")))
		}
		if l := categories[category]; l.Rank() < 0 {
			errs = append(errs, fmt.Errorf("%s.categories.%s: unknown level %q", key, category, l))
		}
	}
	return errs
}
