package targets

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkRefresh5000 is one refresh of a source listing 5,000 servers,
// each its own group with a key and three labels (an app server's shape):
// parse, resolve, and diff against the same set watched.
func BenchmarkRefresh5000(b *testing.B) {
	groups := make([]Group, 5000)
	for i := range groups {
		groups[i] = Group{Targets: []string{fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250)}, Labels: map[string]string{
			"team": "t", "sandbox_id": fmt.Sprintf("sb-%d", i), "user_id": "u", LabelKey: "sk-oh-0123456789abcdef0123456789abcdef"}}
	}
	doc, err := json.Marshal(groups)
	if err != nil {
		b.Fatal(err)
	}
	lim := Limits{MaxTargets: 10000, MaxLabels: 64, MaxValueBytes: 4096}
	parsed, _ := Parse(doc, lim)
	set, _ := Resolve(parsed)
	watched := make(map[string]Target, len(set))
	for _, t := range set {
		watched[t.ID] = t
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		parsed, err := Parse(doc, lim)
		if err != nil {
			b.Fatal(err)
		}
		set, _ := Resolve(parsed)
		if attach, retire := Diff(watched, set); len(attach)+len(retire) != 0 {
			b.Fatal("the same set differs")
		}
	}
}
