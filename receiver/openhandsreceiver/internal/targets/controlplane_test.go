package targets

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRuntimeList(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []Group
		err       string
	}{
		{name: "running with url", doc: `{"runtimes":[
			{"runtime_id":"r1","session_id":"s1","url":"https://r1.example","session_api_key":"k1","status":"running","pod_status":"ready"},
			{"runtime_id":"r2","session_id":"s2","url":"https://r2.example","session_api_key":"k2","status":"paused"},
			{"runtime_id":"r3","session_id":"s3","url":"","session_api_key":"k3","status":"running"},
			{"runtime_id":"r4","url":"https://r4.example","session_api_key":null,"status":"Running"}],"total":4}`,
			want: []Group{
				{Targets: []string{"https://r1.example"}, Labels: map[string]string{"runtime_id": "r1", "sandbox_id": "s1", LabelKey: "k1"}},
				{Targets: []string{"https://r4.example"}, Labels: map[string]string{"runtime_id": "r4"}},
			}},
		{name: "none", doc: `{"runtimes":[],"total":0}`},
		{name: "not a list", doc: `[]`, err: "not a runtime list"},
		{name: "too many", doc: `{"runtimes":[{},{},{},{},{}]}`, err: "more than 4 runtimes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RuntimeList([]byte(tc.doc), lim)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSandboxPage(t *testing.T) {
	const page = `{"items":[
		{"id":"sb1","created_by_user_id":"u1","sandbox_spec_id":"spec","status":"RUNNING","session_api_key":"k1",
		 "exposed_urls":[{"name":"VSCODE","url":"http://h:1/vscode"},{"name":"AGENT_SERVER","url":"http://h:8001"}]},
		{"id":"sb2","created_by_user_id":null,"sandbox_spec_id":"spec","status":"STARTING","session_api_key":null,"exposed_urls":null},
		{"id":"sb3","created_by_user_id":"u3","sandbox_spec_id":"spec","status":"PAUSED","session_api_key":null,"exposed_urls":[]},
		{"id":"sb4","created_by_user_id":"u4","sandbox_spec_id":"spec","status":"ERROR","session_api_key":"k4",
		 "exposed_urls":[{"name":"AGENT_SERVER","url":"http://h:8004"}]}],
	 "next_page_id":"p2"}`
	groups, next, err := SandboxPage([]byte(page), lim)
	require.NoError(t, err)
	assert.Equal(t, "p2", next)
	assert.Equal(t, []Group{{Targets: []string{"http://h:8001"}, Labels: map[string]string{
		"sandbox_id": "sb1", "user_id": "u1", "sandbox_spec_id": "spec", LabelKey: "k1"}}}, groups)

	_, next, err = SandboxPage([]byte(`{"items":[],"next_page_id":null}`), lim)
	require.NoError(t, err)
	assert.Empty(t, next, "the last page")
	_, _, err = SandboxPage([]byte(`{"items":[{},{},{},{},{}]}`), lim)
	assert.ErrorContains(t, err, "more than 4 sandboxes")
	_, _, err = SandboxPage([]byte(`{"items":"x"}`), lim)
	assert.ErrorContains(t, err, "not a sandbox page")
}
