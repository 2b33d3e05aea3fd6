package mapping

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func TestConversationID(t *testing.T) {
	const dashed = "3f2c8a4e-1b7d-4c2e-9a51-0d6f7e8b9c10"
	for _, tc := range []struct {
		name, id, want string
		ok             bool
	}{
		{"what the server sends is kept as is", dashed, dashed, true},
		{"the paging form is dashed", "3f2c8a4e1b7d4c2e9a510d6f7e8b9c10", dashed, true},
		{"upper case is lowered", strings.ToUpper(dashed), dashed, true},
		{"a path", "../../../tenant-b/sockets/session/victim", "", false},
		{"an escaped slash in UUID shape", "3f2c8a4e-1b7d-4c2e-9a51-0d6f7e8b%2F10", "", false},
		{"dashes misplaced", "3f2c8a4e1-b7d-4c2e-9a51-0d6f7e8b9c10", "", false},
		{"not hex", "3f2c8a4e-1b7d-4c2e-9a51-0d6f7e8b9cxz", "", false},
		{"empty", "", "", false},
		{"braced", "{" + dashed + "}", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ConversationID(tc.id)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestOutputIDIsDeterministicIDOfItsParts: an output's id is
// aep.DeterministicID of its source, its origin's fact (key then name),
// its type and its ordinal, at the origin's time, however long the parts.
func TestOutputIDIsDeterministicIDOfItsParts(t *testing.T) {
	at := time.Date(2026, 12, 1, 19, 20, 19, 123456000, time.UTC)
	long := strings.Repeat("y", 300)
	for _, o := range []origin{
		{key: "event ", keyName: "8f6c2f9e-5d1b-4d8e-9a0b-0c3f2b1a7e6d", at: at},
		{key: "end ", at: at},
		{key: "session", at: at},
		{key: "event ", keyName: long, at: at},
	} {
		for _, ordinal := range []int{0, 1, 12} {
			want := aep.DeterministicID(o.at, "openhands://127.0.0.1:8000", o.key+o.keyName, "tool.requested", strconv.Itoa(ordinal))
			assert.Equal(t, want, o.outputID("openhands://127.0.0.1:8000", "tool.requested", ordinal))
		}
	}
}
