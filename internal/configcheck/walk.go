package configcheck // import "github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"

import (
	"reflect"
	"strconv"
	"strings"
	"time"
)

// WalkDurations calls fn with the key and address of every time.Duration
// reachable from cfg (a pointer) through exported struct fields, non-nil
// pointers and slice items, keyed as Validate messages name them
// ("servers[0].timeout"). configchecktest sets each one negative in turn,
// so a duration field added later cannot miss its check. Fields behind
// unexported ones (configoptional.Optional) are not reached.
func WalkDurations(cfg any, fn func(key string, d *time.Duration)) {
	walk(reflect.ValueOf(cfg), "", fn)
}

var durationType = reflect.TypeFor[time.Duration]()

func walk(v reflect.Value, key string, fn func(string, *time.Duration)) {
	if v.Type() == durationType {
		fn(key, v.Addr().Interface().(*time.Duration))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walk(v.Elem(), key, fn)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walk(v.Index(i), key+"["+strconv.Itoa(i)+"]", fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			switch {
			case opts == "squash":
				walk(v.Field(i), key, fn)
			case name != "" && name != "-":
				walk(v.Field(i), join(key, name), fn)
			}
		}
	}
}

func join(key, name string) string {
	if key == "" {
		return name
	}
	return key + "." + name
}
