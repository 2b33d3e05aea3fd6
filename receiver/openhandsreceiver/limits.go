package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

// Every attached conversation holds one socket, one file descriptor, for
// as long as it is attached. Sized to the process's descriptor limit, the
// sockets leave room for the REST calls (discovery, history pages) and
// for the rest of the collector, so that running out of descriptors never
// starves discovery.
const (
	// collectorReserve is left to the rest of the collector: its listeners,
	// exporters, storage files and logs.
	collectorReserve = 256
	// minRESTConns and maxRESTConns bound each server's REST connections.
	minRESTConns = 4
	maxRESTConns = 64
	// maxDescriptors stands in for an unlimited descriptor limit.
	maxDescriptors = 1 << 20
)

// defaultMaxConversations is max_conversations when it is not set, unless
// the descriptor budget is smaller. An agent server runs few conversations
// at once (each drives an LLM loop and a sandbox), and one idle for
// idle_detach gives its socket back; a thousand attached at once is far
// past any we have seen, costs about 30 MB (README "Memory"), and bounds
// what a server listing millions can make the receiver hold.
const defaultMaxConversations = 1000

// connectionBudget splits the descriptor limit nofile between servers:
// each gets (nofile − 256) / servers descriptors, an eighth of them
// (between 4 and 64) for REST connections and the rest for conversation
// sockets, at least one and at most defaultMaxConversations.
func connectionBudget(nofile uint64, servers int) (conversations, rest int) {
	nofile = min(nofile, maxDescriptors)
	usable := int(nofile) - collectorReserve
	if usable < int(nofile)/2 {
		usable = int(nofile) / 2 // a tiny limit: keep half
	}
	perServer := usable / max(servers, 1)
	rest = min(max(perServer/8, minRESTConns), maxRESTConns)
	return min(max(perServer-rest, 1), defaultMaxConversations), rest
}

// fallbackDescriptors is assumed where the limit cannot be read.
const fallbackDescriptors = 1024
