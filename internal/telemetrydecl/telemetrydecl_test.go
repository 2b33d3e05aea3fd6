package telemetrydecl

import (
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestBuilderErr(t *testing.T) {
	provider := sdkmetric.NewMeterProvider()
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(t.Context())) })

	t.Run("none", func(t *testing.T) {
		b := New(provider.Meter("ok"))
		b.Int64Counter("valid_counter", "A counter.", "{event}")
		require.NoError(t, b.Err())
	})
	t.Run("every failed declaration", func(t *testing.T) {
		b := New(provider.Meter("bad"))
		b.Int64Counter("1st_invalid", "Names start with a letter.", "{event}")
		b.Float64Histogram("valid_histogram", "A histogram.", "s")
		counter := b.Int64Counter("2nd_invalid", "Names start with a letter.", "{event}")
		counter.Add(t.Context(), 1)
		err := b.Err()
		require.ErrorContains(t, err, "1st_invalid")
		require.ErrorContains(t, err, "2nd_invalid")
		require.NotContains(t, err.Error(), "valid_histogram")
	})
}
