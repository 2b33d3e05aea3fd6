package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"fmt"
	"hash/fnv"

	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// ShardConfig splits the conversations of every configured server across
// replicas, so that each has exactly one observer (AEP allows one emitter
// per session). A replica observes the conversations whose id hashes to
// its index (shardOf).
type ShardConfig struct {
	// Index is this replica's shard, 0 ≤ index < count. A StatefulSet
	// feeds the pod ordinal through ${env:...}. A pointer, because an
	// ${env:...} that is empty or unset resolves to nothing, which an int
	// would take as 0: every replica would observe shard 0.
	Index *int `mapstructure:"index"`
	// Count is the number of replicas; 1 (default) observes everything.
	Count int `mapstructure:"count"`
}

func (s ShardConfig) validate() error {
	switch {
	case s.Count < 1:
		return fmt.Errorf("count: must be at least 1, got %d", s.Count)
	case s.Index == nil && s.Count > 1:
		return fmt.Errorf("index: must be set when count is %d (an empty or unset ${env:...} leaves it unset)", s.Count)
	case s.Index != nil && (*s.Index < 0 || *s.Index >= s.Count):
		return fmt.Errorf("index: must be in [0, %d), got %d", s.Count, *s.Index)
	}
	return nil
}

// owns reports whether this replica observes the conversation; validate
// has made sure Index is set when Count is above 1.
func (s ShardConfig) owns(conversationID string) bool {
	return s.Count <= 1 || shardOf(conversationID, s.Count) == *s.Index
}

// shardOf is the documented, stable placement of a conversation: FNV-1a
// (64 bit) of its id in the dashed, lowercase UUID form, modulo count. A
// 32-digit hex id (the form the server's paging uses) is dashed first, so
// both spellings of one conversation land on the same replica.
func shardOf(conversationID string, count int) int {
	if id, ok := mapping.ConversationID(conversationID); ok {
		conversationID = id
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(conversationID))
	return int(h.Sum64() % uint64(count))
}
