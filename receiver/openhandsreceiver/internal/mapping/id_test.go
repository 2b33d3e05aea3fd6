package mapping

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
