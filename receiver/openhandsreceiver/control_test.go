package openhandsreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// extensionsHost offers a fixed set of extensions.
type extensionsHost struct {
	component.Host
	extensions map[component.ID]component.Component
}

func (h extensionsHost) GetExtensions() map[component.ID]component.Component { return h.extensions }

// otherExtension is an extension that is not the control gate.
type otherExtension struct {
	component.StartFunc
	component.ShutdownFunc
}

func TestStartNeedsTheNamedControlExtension(t *testing.T) {
	id := component.MustNewID("openhandscontrol")
	for _, tc := range []struct {
		name       string
		extensions map[component.ID]component.Component
		want       string
	}{
		{"not configured", nil, `control: extension "openhandscontrol" is not configured in service::extensions`},
		{"not a control extension", map[component.ID]component.Component{id: otherExtension{}}, "is not an openhandscontrol extension"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Servers = []ServerConfig{{}}
			cfg.Servers[0].Endpoint = "http://127.0.0.1:1"
			cfg.Control = &id
			r, err := newReceiver(cfg, receivertest.NewNopSettings(componentType), consumertest.NewNop())
			require.NoError(t, err)
			err = r.Start(context.Background(), extensionsHost{Host: componenttest.NewNopHost(), extensions: tc.extensions})
			assert.ErrorContains(t, err, tc.want)
			require.NoError(t, r.Shutdown(context.Background()))
		})
	}
}
