// Package hosttest is the collector host and the extensions components'
// tests start with.
package hosttest // import "github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
)

// Extensions is a host that offers exactly these extensions.
type Extensions map[component.ID]component.Component

// GetExtensions implements component.Host.
func (h Extensions) GetExtensions() map[component.ID]component.Component { return h }

// Inert is an extension that only starts and stops: the wrong kind
// wherever a component looks for an extension that does something.
type Inert struct {
	component.StartFunc
	component.ShutdownFunc
}

// FileStorage starts the file_storage extension on dir; cleanup stops it
// (again, if the test already did).
func FileStorage(tb testing.TB, dir string) extension.Extension {
	tb.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(tb, err)
	require.NoError(tb, ext.Start(context.Background(), componenttest.NewNopHost()))
	tb.Cleanup(func() { require.NoError(tb, ext.Shutdown(context.Background())) })
	return ext
}
