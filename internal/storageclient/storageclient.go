// Package storageclient gets a component's client of a configured storage
// extension, as filelog gets its own: one client per component, which the
// component closes on shutdown.
package storageclient

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Get returns the client of the storage extension id for the component
// self of kind, or an error naming id when the host has no such extension
// or it is not a storage extension.
func Get(ctx context.Context, host component.Host, id component.ID, kind component.Kind, self component.ID) (storage.Client, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not configured", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension", id)
	}
	client, err := se.GetClient(ctx, kind, self, "")
	if err != nil {
		return nil, fmt.Errorf("storage: get a client of %q: %w", id, err)
	}
	return client, nil
}
