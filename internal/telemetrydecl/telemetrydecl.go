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

// keep records err; the meter returns a usable (no-op) instrument along
// with an error, so the caller passes its instrument on either way.
func (b *Builder) keep(err error) {
	if err != nil {
		b.errs = append(b.errs, err)
	}
}

func (b *Builder) Int64Counter(name, description, unit string) metric.Int64Counter {
	instrument, err := b.meter.Int64Counter(name, metric.WithDescription(description), metric.WithUnit(unit))
	b.keep(err)
	return instrument
}

func (b *Builder) Int64UpDownCounter(name, description, unit string) metric.Int64UpDownCounter {
	instrument, err := b.meter.Int64UpDownCounter(name, metric.WithDescription(description), metric.WithUnit(unit))
	b.keep(err)
	return instrument
}

func (b *Builder) Int64Gauge(name, description, unit string) metric.Int64Gauge {
	instrument, err := b.meter.Int64Gauge(name, metric.WithDescription(description), metric.WithUnit(unit))
	b.keep(err)
	return instrument
}

func (b *Builder) Float64Histogram(name, description, unit string) metric.Float64Histogram {
	instrument, err := b.meter.Float64Histogram(name, metric.WithDescription(description), metric.WithUnit(unit))
	b.keep(err)
	return instrument
}

// Int64ObservableCounter registers a counter whose value observe reports
// when the meter collects.
func (b *Builder) Int64ObservableCounter(name, description, unit string, observe metric.Int64Callback) {
	_, err := b.meter.Int64ObservableCounter(name, metric.WithDescription(description), metric.WithUnit(unit),
		metric.WithInt64Callback(observe))
	b.keep(err)
}

// Int64ObservableGauge registers a gauge whose value observe reports when
// the meter collects.
func (b *Builder) Int64ObservableGauge(name, description, unit string, observe metric.Int64Callback) {
	_, err := b.meter.Int64ObservableGauge(name, metric.WithDescription(description), metric.WithUnit(unit),
		metric.WithInt64Callback(observe))
	b.keep(err)
}
