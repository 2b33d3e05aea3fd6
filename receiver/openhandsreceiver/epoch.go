package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"strconv"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// sessionSource is the source of one generation of a conversation's
// session: the RECOMMENDED aep://{host:port}/agent/{agent}/session/{id}
// qualified by the generation's epoch. AEP keeps run terminals and
// session.ended exclusive per (source, session) across epochs, and dedupes
// on (source, id); a generation that cannot resume its predecessor's state
// (no storage, unreadable state, a conversation resharded here) replays
// the conversation's history, so it must be a new session of a new
// emitter, never a second account in the old one. The epoch in the source
// makes it so, and makes every id it derives differ from the old ones.
func sessionSource(hostPort, agent, conversationID string, epoch int64) string {
	return aep.SessionSource(hostPort, agent, conversationID) + "?epoch=" + strconv.FormatInt(epoch, 10)
}
