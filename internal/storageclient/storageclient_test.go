package storageclient

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

type host struct {
	component.Host
	extensions map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.extensions }

// notStorage is an extension that keeps nothing.
type notStorage struct {
	component.StartFunc
	component.ShutdownFunc
}

func TestGetRefusals(t *testing.T) {
	id := component.MustNewID("file_storage")
	for _, tc := range []struct {
		name       string
		extensions map[component.ID]component.Component
		want       string
	}{
		{name: "not configured", want: `storage: extension "file_storage" is not configured`},
		{name: "not a storage extension", extensions: map[component.ID]component.Component{id: notStorage{}},
			want: `storage: extension "file_storage" is not a storage extension`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Get(context.Background(), host{componenttest.NewNopHost(), tc.extensions}, id,
				component.KindProcessor, component.MustNewID("aepinbound"))
			assert.EqualError(t, err, tc.want)
		})
	}
}
