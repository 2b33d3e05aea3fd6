// Package telemetrydecl builds a component's instruments from one
// statement each, collecting the errors itself: a component declares a
// metric in one place and no error slot can fall out of step with it.
package telemetrydecl // import "github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl"

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// Builder creates instruments on one meter and keeps the errors of those
// it could not create; the caller checks Err once, after the last.
type Builder struct {
	meter metric.Meter
	errs  []error
}

// New returns a Builder creating instruments on meter.
func New(meter metric.Meter) *Builder {
	return &Builder{meter: meter}
}

// Err is every creation error so far, joined; nil when there was none.
func (b *Builder) Err() error {
	return errors.Join(b.errs...)
}

// create makes one instrument with newInstrument and keeps its error;
// the meter returns a usable (no-op) instrument along with an error, so
// the caller holds it either way. O is the instrument kind's option type,
// which the declaration's options all implement.
func create[O, I any](b *Builder, newInstrument func(string, ...O) (I, error), name string, options ...O) I {
	instrument, err := newInstrument(name, options...)
	if err != nil {
		b.errs = append(b.errs, err)
	}
	return instrument
}

func (b *Builder) Int64Counter(name, description, unit string) metric.Int64Counter {
	return create[metric.Int64CounterOption](b, b.meter.Int64Counter, name,
		metric.WithDescription(description), metric.WithUnit(unit))
}

func (b *Builder) Int64UpDownCounter(name, description, unit string) metric.Int64UpDownCounter {
	return create[metric.Int64UpDownCounterOption](b, b.meter.Int64UpDownCounter, name,
		metric.WithDescription(description), metric.WithUnit(unit))
}

func (b *Builder) Int64Gauge(name, description, unit string) metric.Int64Gauge {
	return create[metric.Int64GaugeOption](b, b.meter.Int64Gauge, name,
		metric.WithDescription(description), metric.WithUnit(unit))
}

func (b *Builder) Float64Histogram(name, description, unit string) metric.Float64Histogram {
	return create[metric.Float64HistogramOption](b, b.meter.Float64Histogram, name,
		metric.WithDescription(description), metric.WithUnit(unit))
}

// Int64ObservableCounter registers a counter whose value observe reports
// when the meter collects.
func (b *Builder) Int64ObservableCounter(name, description, unit string, observe metric.Int64Callback) {
	create[metric.Int64ObservableCounterOption](b, b.meter.Int64ObservableCounter, name,
		metric.WithDescription(description), metric.WithUnit(unit), metric.WithInt64Callback(observe))
}

// Int64ObservableGauge registers a gauge whose value observe reports when
// the meter collects.
func (b *Builder) Int64ObservableGauge(name, description, unit string, observe metric.Int64Callback) {
	create[metric.Int64ObservableGaugeOption](b, b.meter.Int64ObservableGauge, name,
		metric.WithDescription(description), metric.WithUnit(unit), metric.WithInt64Callback(observe))
}
