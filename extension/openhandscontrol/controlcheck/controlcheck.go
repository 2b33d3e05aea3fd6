// Package controlcheck is a confmap converter that fails a configuration
// whose openhands receiver or aeprelay exporter names a control extension
// that service::extensions does not list. A component's Validate sees only
// its own section, and `validate` starts no component, so without it the
// mistake surfaces only when the collector starts. The distribution's
// builder-config.yaml installs it; it changes nothing in the configuration.
package controlcheck // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol/controlcheck"

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
)

// NewFactory returns the converter's factory, as ocb's converters list
// expects.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter { return converter{} })
}

type converter struct{}

// controlled are the component kinds and types whose control key names
// the extension.
var controlled = []struct{ kind, typ string }{
	{"receivers", "openhands"},
	{"exporters", "aeprelay"},
}

// Convert reports every control key whose extension is not in
// service::extensions.
func (converter) Convert(_ context.Context, conf *confmap.Conf) error {
	running := map[component.ID]bool{}
	names, _ := conf.Get("service::extensions").([]any)
	for _, name := range names {
		if id, ok := parseID(name); ok {
			running[id] = true
		}
	}
	var errs []error
	for _, c := range controlled {
		section, _ := conf.Get(c.kind).(map[string]any)
		for _, key := range slices.Sorted(maps.Keys(section)) {
			id, ok := parseID(key)
			if !ok || id.Type().String() != c.typ {
				continue
			}
			cfg, _ := section[key].(map[string]any)
			ref, ok := parseID(cfg["control"])
			if ok && !running[ref] {
				errs = append(errs, fmt.Errorf("%s::%s::control: extension %q is not in service::extensions, so it never starts and %s cannot find it; list it there",
					c.kind, key, ref, id))
			}
		}
	}
	return errors.Join(errs...)
}

// parseID reads a component id the way the collector does.
func parseID(v any) (component.ID, bool) {
	s, ok := v.(string)
	if !ok {
		return component.ID{}, false
	}
	var id component.ID
	return id, id.UnmarshalText([]byte(s)) == nil
}
