package e2e

import (
	"context"
	"sync/atomic"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// storageWritten counts the bytes (keys and values) the collector's
// components set through the counting_storage extension.
var storageWritten atomic.Int64

var countingStorageType = component.MustNewType("counting_storage")

// countingStorageFactory is file_storage, configured the same way, whose
// clients count what they write: the benchmark's bytes written to storage
// per event.
func countingStorageFactory() extension.Factory {
	files := filestorage.NewFactory()
	return extension.NewFactory(countingStorageType, files.CreateDefaultConfig,
		func(ctx context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			set.ID = component.NewIDWithName(files.Type(), set.ID.Name())
			ext, err := files.Create(ctx, set, cfg)
			if err != nil {
				return nil, err
			}
			return countingStorage{ext.(storage.Extension)}, nil
		}, files.Stability())
}

type countingStorage struct{ storage.Extension }

func (s countingStorage) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	client, err := s.Extension.GetClient(ctx, kind, id, name)
	if err != nil {
		return nil, err
	}
	return countingClient{client}, nil
}

type countingClient struct{ storage.Client }

func (c countingClient) Set(ctx context.Context, key string, value []byte) error {
	storageWritten.Add(int64(len(key) + len(value)))
	return c.Client.Set(ctx, key, value)
}

func (c countingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		if op.Type == storage.Set {
			storageWritten.Add(int64(len(op.Key) + len(op.Value)))
		}
	}
	return c.Client.Batch(ctx, ops...)
}
