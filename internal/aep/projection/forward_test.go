package projection

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schemas"
)

// TestEventNameOfEveryType: a type the registry lists, every one with a
// payload schema among them, is named from the table without building
// its name; any other type's name is built; each is the prefix and the
// type.
func TestEventNameOfEveryType(t *testing.T) {
	files, err := fs.Glob(schemas.FS, "types/*.schema.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		typ := strings.TrimSuffix(strings.TrimPrefix(file, "types/"), ".schema.json")
		require.Contains(t, eventNames, typ, "a type with a payload schema is registered")
	}
	for typ := range eventNames {
		require.Equal(t, EventNamePrefix+typ, eventName(typ))
		require.Zero(t, testing.AllocsPerRun(10, func() { _ = eventName(typ) }), typ)
	}
	for _, typ := range []string{"x.openhands.conversation.message", "x.acme.thing", ""} {
		require.Equal(t, EventNamePrefix+typ, eventName(typ))
	}
}
