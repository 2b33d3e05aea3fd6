package capture

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestCheckCeiling(t *testing.T) {
	tests := []struct {
		name       string
		level      aep.Capture
		categories map[string]aep.Capture
		want       []string
	}{
		{"valid", aep.CaptureMetadata, map[string]aep.Capture{"attention": aep.CaptureRedacted, "x": aep.CaptureNone}, nil},
		{"unknown_level", "everything", nil, []string{`capture.level: unknown level "everything"`}},
		{"unknown_category", aep.CaptureFull, map[string]aep.Capture{"tools": aep.CaptureNone}, []string{`capture.categories: unknown category "tools"`}},
		{"unknown_category_level", aep.CaptureFull, map[string]aep.Capture{"run": "verbatim"}, []string{`capture.categories.run: unknown level "verbatim"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := errors.Join(CheckCeiling("capture", tt.level, tt.categories)...)
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}
