package targets

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var lim = Limits{MaxTargets: 4, MaxLabels: 4, MaxValueBytes: 64}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []Group
		err       string
	}{
		{name: "json", doc: `[{"targets":["a:1","b:2"],"labels":{"team":"x"}}]`,
			want: []Group{{Targets: []string{"a:1", "b:2"}, Labels: map[string]string{"team": "x"}}}},
		{name: "yaml", doc: "- targets: [a:1]\n  labels:\n    team: x\n",
			want: []Group{{Targets: []string{"a:1"}, Labels: map[string]string{"team": "x"}}}},
		{name: "empty is no targets", doc: "", want: nil},
		{name: "empty list", doc: "[]", want: []Group{}},
		{name: "yaml flow", doc: "[{targets: [a:1]}]", want: []Group{{Targets: []string{"a:1"}}}},
		{name: "not a list", doc: `{"targets":[]}`, err: "not a list of target groups"},
		{name: "too many targets across groups", doc: `[{"targets":["a:1","b:1","c:1"]},{"targets":["d:1","e:1"]}]`, err: "more than 4 targets"},
		{name: "too many labels", doc: `[{"targets":[],"labels":{"a":"","b":"","c":"","d":"","e":""}}]`, err: "more than 4 labels"},
		{name: "bad label name", doc: `[{"targets":[],"labels":{"te.am":"x"}}]`, err: `"te.am" is not a label name`},
		{name: "long value", doc: `[{"targets":[],"labels":{"a":"` + strings.Repeat("v", 65) + `"}}]`, err: "label a is longer than 64 bytes"},
		{name: "long target", doc: `[{"targets":["` + strings.Repeat("h", 65) + `"]}]`, err: "a target is longer than 64 bytes"},
		{name: "yaml alias bomb is refused", doc: "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n", err: "not a list of target groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.doc), lim)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestParseYAMLRefusesAWideMappingBeforeDecoding: the YAML decoder
// compares a mapping's keys pairwise; a 2 MiB mapping of 200,000 keys took
// it about a minute (8 MiB: a quarter of an hour) before the limits were
// held. Held to them first, it is refused in well under a second.
func TestParseYAMLRefusesAWideMappingBeforeDecoding(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("- targets: [a:1]\n  labels:\n")
	for i := range 200_000 {
		fmt.Fprintf(&doc, "    l%d: x\n", i)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Parse([]byte(doc.String()), lim)
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "a mapping of more than 4 keys")
	case <-time.After(20 * time.Second):
		t.Fatal("a wide YAML mapping was decoded before the limits were held")
	}
}

func TestParseJSONRefusesYAML(t *testing.T) {
	_, err := ParseJSON([]byte("[{targets: [a:1]}]"), lim)
	assert.ErrorContains(t, err, "not a JSON list of target groups")
	got, err := ParseJSON([]byte(`[{"targets":["a:1"]}]`), lim)
	require.NoError(t, err)
	assert.Equal(t, []Group{{Targets: []string{"a:1"}}}, got)
}

func TestResolve(t *testing.T) {
	groups := []Group{
		{Targets: []string{"a:1", "https://b:443/", "ws://c:1", "d"}, Labels: map[string]string{
			"team": "red", LabelKeyFile: "a.key", "__meta_x": "hidden"}},
		{Targets: []string{"A:1", "e:2"}, Labels: map[string]string{LabelScheme: "https", LabelKey: "k"}},
		{Targets: []string{"f:3"}, Labels: map[string]string{LabelKey: "k", LabelKeyEnv: "E"}},
		{Targets: []string{"g:4"}, Labels: map[string]string{LabelScheme: "ftp"}},
		{Targets: []string{"u:p@h:1", "h:1?x=1"}},
	}
	got, errs := Resolve(groups)
	red := map[string]string{"team": "red"}
	assert.Equal(t, []Target{
		{ID: "http://a:1", Endpoint: "http://a:1", Key: KeyRef{KeyFile, "a.key"}, Attributes: red},
		{ID: "https://b", Endpoint: "https://b:443/", Key: KeyRef{KeyFile, "a.key"}, Attributes: red},
		{ID: "http://d", Endpoint: "http://d", Key: KeyRef{KeyFile, "a.key"}, Attributes: red},
		{ID: "https://a:1", Endpoint: "https://A:1", Key: KeyRef{KeyInline, "k"}, Attributes: map[string]string{}},
		{ID: "https://e:2", Endpoint: "https://e:2", Key: KeyRef{KeyInline, "k"}, Attributes: map[string]string{}},
	}, got)
	require.Len(t, errs, 5, "%v", errs)
	for _, err := range errs {
		assert.NotContains(t, err.Error(), "p@", "an error quotes no credential")
	}
	assert.ErrorContains(t, errs[1], "more than one of")
	assert.ErrorContains(t, errs[2], "__scheme__ must be http or https")
}

func TestKeyRefHidesItsValue(t *testing.T) {
	assert.Equal(t, "label", KeyRef{KeyInline, "secret"}.String())
}

func TestDiff(t *testing.T) {
	a := Target{ID: "a", Endpoint: "http://a"}
	b := Target{ID: "b", Endpoint: "http://b"}
	bRekeyed := Target{ID: "b", Endpoint: "http://b", Key: KeyRef{KeyInline, "k2"}}
	bRelabeled := Target{ID: "b", Endpoint: "http://b", Attributes: map[string]string{"team": "x"}}
	c := Target{ID: "c", Endpoint: "http://c"}
	for _, tc := range []struct {
		name    string
		watched []Target
		listed  []Target
		attach  []Target
		retire  []string
	}{
		{name: "first refresh", listed: []Target{a, b}, attach: []Target{a, b}},
		{name: "unchanged", watched: []Target{a, b}, listed: []Target{b, a}},
		{name: "appear and vanish", watched: []Target{a, b}, listed: []Target{b, c}, attach: []Target{c}, retire: []string{"a"}},
		{name: "new key is a new target", watched: []Target{b}, listed: []Target{bRekeyed}, attach: []Target{bRekeyed}, retire: []string{"b"}},
		{name: "new labels too", watched: []Target{b}, listed: []Target{bRelabeled}, attach: []Target{bRelabeled}, retire: []string{"b"}},
		{name: "all gone", watched: []Target{a}, retire: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			watched := map[string]Target{}
			for _, w := range tc.watched {
				watched[w.ID] = w
			}
			attach, retire := Diff(watched, tc.listed)
			assert.Equal(t, tc.attach, attach)
			assert.ElementsMatch(t, tc.retire, retire)
		})
	}
}

func TestMerge(t *testing.T) {
	a1 := Target{ID: "a", Endpoint: "http://a", Key: KeyRef{KeyInline, "1"}}
	a2 := Target{ID: "a", Endpoint: "http://a", Key: KeyRef{KeyInline, "2"}}
	b := Target{ID: "b", Endpoint: "http://b"}
	s := Target{ID: "s", Endpoint: "http://s"}
	assert.Equal(t, []Target{a1, b}, Merge(map[string]bool{"s": true}, []Target{a1, s}, []Target{a2, b}),
		"the first source to list an endpoint wins; a static server is never a target")
}
