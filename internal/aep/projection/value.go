package projection

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// putValue writes a decoded JSON value (the kinds aep.Canonical accepts) as
// an AnyValue; see the package doc for how numbers are typed.
func putValue(dst pcommon.Value, v any) error {
	switch t := v.(type) {
	case nil:
		// A fresh or reset Value is already empty, JSON null.
	case string:
		dst.SetStr(t)
	case bool:
		dst.SetBool(t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			dst.SetInt(i)
			return nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return fmt.Errorf("number %s: %w", t, err)
		}
		dst.SetDouble(f)
	case int:
		dst.SetInt(int64(t))
	case int32:
		dst.SetInt(int64(t))
	case int64:
		dst.SetInt(t)
	case uint64:
		if t > math.MaxInt64 {
			dst.SetDouble(float64(t))
		} else {
			dst.SetInt(int64(t))
		}
	case float32:
		return putDouble(dst, float64(t))
	case float64:
		return putDouble(dst, t)
	case []any:
		s := dst.SetEmptySlice()
		s.EnsureCapacity(len(t))
		for i, x := range t {
			if err := putValue(s.AppendEmpty(), x); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case map[string]any:
		m := dst.SetEmptyMap()
		m.EnsureCapacity(len(t))
		var keys [smallMap]string
		for _, k := range appendSortedKeys(keys[:0], t) {
			if err := putValue(m.PutEmpty(k), t[k]); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		}
	default:
		return fmt.Errorf("value of type %T is not a decoded JSON value", v)
	}
	return nil
}

// appendSortedKeys appends m's keys to dst, sorted: it fixes the order of
// attributes and map entries, so the same event always yields the same
// record. Callers pass a stack array of smallMap keys, enough for most.
func appendSortedKeys[V any](dst []string, m map[string]V) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}

const smallMap = 16

func putDouble(dst pcommon.Value, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%v is not a JSON number", f)
	}
	dst.SetDouble(f)
	return nil
}

// rawValue is putValue's inverse: numbers come back as json.Number, the form
// aep.Event keeps in data.
func rawValue(v pcommon.Value) (any, error) {
	switch v.Type() {
	case pcommon.ValueTypeEmpty:
		return nil, nil
	case pcommon.ValueTypeStr:
		return v.Str(), nil
	case pcommon.ValueTypeBool:
		return v.Bool(), nil
	case pcommon.ValueTypeInt:
		return json.Number(strconv.FormatInt(v.Int(), 10)), nil
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("double %v is not a JSON number", f)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		out := make([]any, s.Len())
		for i := range out {
			x, err := rawValue(s.At(i))
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = x
		}
		return out, nil
	case pcommon.ValueTypeMap:
		return rawMap(v.Map())
	default:
		return nil, fmt.Errorf("%s value has no JSON form", v.Type())
	}
}

func rawMap(m pcommon.Map) (map[string]any, error) {
	out := make(map[string]any, m.Len())
	for k, x := range m.All() {
		raw, err := rawValue(x)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		out[k] = raw
	}
	return out, nil
}
