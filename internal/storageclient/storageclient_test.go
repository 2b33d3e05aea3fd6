package storageclient

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
)

func TestGetRefusals(t *testing.T) {
	id := component.MustNewID("file_storage")
	for _, tc := range []struct {
		name       string
		extensions map[component.ID]component.Component
		want       string
	}{
		{name: "not configured", want: `storage: extension "file_storage" is not configured`},
		{name: "not a storage extension", extensions: map[component.ID]component.Component{id: hosttest.Inert{}},
			want: `storage: extension "file_storage" is not a storage extension`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Get(context.Background(), hosttest.Extensions(tc.extensions), id,
				component.KindProcessor, component.MustNewID("aepinbound"))
			assert.EqualError(t, err, tc.want)
		})
	}
}
