package openhandstest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// maxPageSize is the search limit ceiling and the replay page size.
const maxPageSize = 100

// eventQuery holds the events search filters.
type eventQuery struct {
	pageID       string
	limit        int
	kind         string // fully-qualified class path
	source       string
	body         string
	descending   bool
	timestampGTE string // naive, normalised
	timestampLT  string
}

// searchEventsLocked is EventService._search_events_sync: walk the log in
// index order from page_id (inclusive; unknown ids restart at the natural
// start), keep matches, and name the first match past the limit as
// next_page_id.
func searchEventsLocked(c *conversation, q eventQuery) ([]storedEvent, string) {
	total := len(c.log)
	start, found := c.index[q.pageID]
	if q.pageID == "" || !found {
		start = 0
		if q.descending {
			start = total - 1
		}
	}
	step := 1
	if q.descending {
		step = -1
	}
	var items []storedEvent
	for i := start; i >= 0 && i < total; i += step {
		se := c.log[i]
		if !q.matches(se.event) {
			continue
		}
		if len(items) >= q.limit {
			return items, se.event.ID()
		}
		items = append(items, se)
	}
	return items, ""
}

func (q eventQuery) matches(ev Event) bool {
	if q.kind != "" && KindFQN(ev.Kind()) != q.kind {
		return false
	}
	if q.source != "" && ev.Source() != q.source {
		return false
	}
	// Plain string comparison, as the server compares ISO strings.
	if q.timestampGTE != "" && ev.Timestamp() < q.timestampGTE {
		return false
	}
	if q.timestampLT != "" && ev.Timestamp() >= q.timestampLT {
		return false
	}
	return q.body == "" || messageBodyContains(ev, q.body)
}

// messageBodyContains is the `body` filter: a case-insensitive substring of
// a MessageEvent's text, extended content or reasoning.
func messageBodyContains(ev Event, needle string) bool {
	if ev.Kind() != KindMessageEvent {
		return false
	}
	var texts []string
	collect := func(items any) {
		list, _ := items.([]any)
		for _, item := range list {
			if m, ok := item.(map[string]any); ok {
				if text, ok := m["text"].(string); ok {
					texts = append(texts, text)
				}
			}
		}
	}
	if msg, ok := ev["llm_message"].(map[string]any); ok {
		collect(msg["content"])
		if reasoning, ok := msg["reasoning_content"].(string); ok {
			texts = append(texts, reasoning)
		}
	}
	collect(ev["extended_content"])
	needle = strings.ToLower(needle)
	for _, text := range texts {
		if strings.Contains(strings.ToLower(text), needle) {
			return true
		}
	}
	return false
}

// conversationQuery holds the conversation search parameters.
type conversationQuery struct {
	pageID    string // hex
	limit     int
	status    string
	sortOrder string
}

// searchConversationsLocked is ConversationService._search_conversations:
// filter by status, stable-sort by created/updated time, start at the hex
// page_id (unknown = 0), and name the first item past the limit.
func (s *Server) searchConversationsLocked(q conversationQuery) ([]*conversation, string) {
	records := make([]*conversation, 0, len(s.conversations))
	for _, c := range s.conversations {
		if q.status == "" || c.status() == q.status {
			records = append(records, c)
		}
	}
	// Insertion order first, so the stable sort keeps it among equal keys.
	sort.Slice(records, func(i, j int) bool { return records[i].created < records[j].created })
	key := func(c *conversation) time.Time { return c.createdAt }
	if q.sortOrder == "UPDATED_AT" || q.sortOrder == "UPDATED_AT_DESC" {
		key = func(c *conversation) time.Time { return c.updatedAt }
	}
	descending := strings.HasSuffix(q.sortOrder, "_DESC")
	sort.SliceStable(records, func(i, j int) bool {
		if descending {
			return key(records[j]).Before(key(records[i]))
		}
		return key(records[i]).Before(key(records[j]))
	})
	start := 0
	if q.pageID != "" {
		for i, c := range records {
			if hexID(c.id) == q.pageID {
				start = i
				break
			}
		}
	}
	var items []*conversation
	for _, c := range records[start:] {
		if len(items) >= q.limit {
			return items, hexID(c.id)
		}
		items = append(items, c)
	}
	return items, ""
}

// conversationInfoLocked renders ConversationInfo: state fields plus stored
// metadata, nulls included (a response model, not exclude_none).
func (s *Server) conversationInfoLocked(c *conversation) map[string]any {
	info := make(map[string]any, len(c.state)+12)
	for k, v := range c.state {
		info[k] = v
	}
	info["id"] = c.id
	info["title"] = c.title
	info["metrics"] = nil
	info["created_at"] = formatUTC(c.createdAt)
	info["updated_at"] = formatUTC(c.updatedAt)
	info["leaf_event_id"] = nil
	if c.leafID != "" {
		info["leaf_event_id"] = c.leafID
	}
	s.lineageLocked(c, info)
	info["current_model_id"] = nil
	info["available_models"] = []any{}
	info["supports_runtime_model_switch"] = false
	info["launched_agent_profile"] = nil
	info["client_tools"] = []any{}
	return info
}

// normalizeQueryTime parses an ISO-8601 datetime as pydantic would and
// returns the naive server-local isoformat() string the server compares
// event timestamps against. Aware values are converted to loc.
func normalizeQueryTime(value string, loc *time.Location) (string, error) {
	layouts := []struct {
		layout string
		aware  bool
	}{
		{"2006-01-02T15:04:05.999999999Z07:00", true},
		{"2006-01-02 15:04:05.999999999Z07:00", true},
		{"2006-01-02T15:04:05.999999999", false},
		{"2006-01-02 15:04:05.999999999", false},
		{"2006-01-02T15:04Z07:00", true},
		{"2006-01-02T15:04", false},
		{"2006-01-02", false},
	}
	for _, l := range layouts {
		var t time.Time
		var err error
		if l.aware {
			t, err = time.Parse(l.layout, value)
			if err == nil {
				t = t.In(loc)
			}
		} else {
			t, err = time.ParseInLocation(l.layout, value, loc)
		}
		if err == nil {
			return FormatTimestamp(t.Truncate(time.Microsecond)), nil
		}
	}
	return "", fmt.Errorf("input should be a valid datetime: %q", value)
}

// parseBool accepts what pydantic accepts for a bool query parameter.
func parseBool(value string) (bool, error) {
	switch strings.ToLower(value) {
	case "1", "true", "t", "yes", "y", "on":
		return true, nil
	case "0", "false", "f", "no", "n", "off":
		return false, nil
	}
	return false, errors.New("input should be a valid boolean")
}
