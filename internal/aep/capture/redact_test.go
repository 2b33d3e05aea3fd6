package capture

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

// redactionOpts are the per-case options of redaction/cases.json.
type redactionOpts struct {
	SecretValues []string `json:"secretValues"`
	Home         string   `json:"home"`
	PII          *bool    `json:"pii"`
}

// redactionCase is one text or value case. Unknown keys fail the decode,
// so a case that grows a new expectation cannot pass unchecked.
type redactionCase struct {
	Name           string          `json:"name"`
	Opts           redactionOpts   `json:"opts"`
	Input          json.RawMessage `json:"input"`
	MustContain    []string        `json:"must_contain"`
	MustNotContain []string        `json:"must_not_contain"`
}

type redactionCorpus struct {
	Comment    string          `json:"$comment"`
	TextCases  []redactionCase `json:"text_cases"`
	ValueCases []redactionCase `json:"value_cases"`
}

func loadRedactionCorpus(t testing.TB) redactionCorpus {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(aeptest.FixturesDir(t), "redaction", "cases.json"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c redactionCorpus
	require.NoError(t, dec.Decode(&c), "redaction/cases.json")
	require.NotEmpty(t, c.TextCases)
	require.NotEmpty(t, c.ValueCases)
	return c
}

func (c redactionCase) redactor(t testing.TB) *Redactor {
	t.Helper()
	r, err := NewRedactor(RedactorConfig{
		SecretValues: c.Opts.SecretValues,
		Home:         c.Opts.Home,
		DisablePII:   c.Opts.PII != nil && !*c.Opts.PII,
	})
	require.NoError(t, err)
	return r
}

func (c redactionCase) textInput(t testing.TB) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(c.Input, &s), "text case input must be a string")
	return s
}

func (c redactionCase) check(t *testing.T, out string) {
	t.Helper()
	for _, want := range c.MustContain {
		assert.Contains(t, out, want)
	}
	for _, leak := range c.MustNotContain {
		assert.NotContains(t, out, leak)
	}
}

func TestRedactorTextCorpus(t *testing.T) {
	for _, c := range loadRedactionCorpus(t).TextCases {
		t.Run(c.Name, func(t *testing.T) {
			r := c.redactor(t)
			out := r.Text(c.textInput(t))
			c.check(t, out)
			assert.Equal(t, out, r.Text(out), "redacting twice must change nothing")
		})
	}
}

func TestRedactorValueCorpus(t *testing.T) {
	for _, c := range loadRedactionCorpus(t).ValueCases {
		t.Run(c.Name, func(t *testing.T) {
			in, err := aep.DecodeValue(c.Input)
			require.NoError(t, err)
			before := marshal(t, in)
			out := c.redactor(t).Value(in)
			c.check(t, marshal(t, out))
			assert.Equal(t, before, marshal(t, in), "Value must not modify its input")
		})
	}
}

func marshal(t testing.TB, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return strings.TrimSuffix(b.String(), "\n")
}

func TestRedactorValue(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{})
	require.NoError(t, err)
	in := map[string]any{
		"max_tokens":    json.Number("100"),
		"token_count":   json.Number("7"),
		"tokens":        []any{"plain-looking"},
		"password":      json.Number("123456"),
		"token":         nil,
		"api_key":       true,
		"clientSecret":  map[string]any{"nested": "x"},
		"note":          "key AKIAIOSFODNN7EXAMPLE here",
		"list":          []any{"/home/alice/x", json.Number("3")},
		"AKIAIOSFODNN7": "keys are never altered",
	}
	assert.Equal(t, map[string]any{
		"max_tokens":    json.Number("100"),
		"token_count":   json.Number("7"),
		"tokens":        SecretMarker,
		"password":      SecretMarker,
		"token":         nil,
		"api_key":       true,
		"clientSecret":  SecretMarker,
		"note":          "key " + SecretMarker + " here",
		"list":          []any{"~/x", json.Number("3")},
		"AKIAIOSFODNN7": "keys are never altered",
	}, r.Value(in))
}

// TestRedactorValueTokenUsage: "token" in a key names a credential only
// when the key is not about counting tokens; the agent server's stats
// (accumulated_token_usage, per_turn_token) keep their figures, and a
// token credential beside them does not.
func TestRedactorValueTokenUsage(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{})
	require.NoError(t, err)
	usage := map[string]any{
		"model": "openai/fake", "prompt_tokens": json.Number("120"), "completion_tokens": json.Number("7"),
		"cache_read_tokens": json.Number("0"), "per_turn_token": json.Number("127"), "response_id": "resp-1",
	}
	stats := map[string]any{"stats": map[string]any{"usage_to_metrics": map[string]any{"agent": map[string]any{
		"model_name": "openai/fake", "accumulated_cost": json.Number("0.01"),
		"accumulated_token_usage": usage, "token_usages": []any{usage},
	}}}}
	assert.Equal(t, stats, r.Value(stats), "token usage is no credential")
	for _, tc := range []struct {
		key   string
		value any
		want  any
	}{
		{"access_token", "plainlooking0value", SecretMarker},
		{"authToken", "plainlooking0value", SecretMarker},
		{"X-Auth-Token", "plainlooking0value", SecretMarker},
		{"token", map[string]any{"value": "x"}, SecretMarker},
		{"tokens", []any{"plain-looking"}, SecretMarker},
		{"token_secret", "plainlooking0value", SecretMarker},
		{"token_usage", map[string]any{"prompt_tokens": json.Number("3")}, map[string]any{"prompt_tokens": json.Number("3")}},
		{"tokenLimit", json.Number("4096"), json.Number("4096")},
		{"token_type", "bearer", "bearer"},
		{"per_turn_token", json.Number("12"), json.Number("12")},
		{"pin_password", json.Number("1234"), SecretMarker},
	} {
		t.Run(tc.key, func(t *testing.T) {
			assert.Equal(t, map[string]any{tc.key: tc.want}, r.Value(map[string]any{tc.key: tc.value}))
		})
	}
}

func TestRedactorText(t *testing.T) {
	tests := []struct {
		name string
		cfg  RedactorConfig
		in   string
		want string
	}{
		{
			name: "secret values shorter than four characters are ignored",
			cfg:  RedactorConfig{SecretValues: []string{"abc", "hunter2"}},
			in:   "abc hunter2",
			want: "abc " + SecretMarker,
		},
		{
			name: "a secret value containing another is redacted whole",
			cfg:  RedactorConfig{SecretValues: []string{"pass", "pass-phrase value"}},
			in:   "use pass-phrase value, not pass",
			want: "use " + SecretMarker + ", not " + SecretMarker,
		},
		{
			name: "configured home outside /home, bounded by a separator",
			cfg:  RedactorConfig{Home: "/srv/op/"},
			in:   "/srv/op/x and /srv/operator/y and /srv/op",
			want: "~/x and /srv/operator/y and ~",
		},
		{
			name: "windows home, escaped or not",
			in:   `C:\Users\bob\x and C:\\Users\\eve\\y`,
			want: `~\x and ~\\y`,
		},
		{
			name: "bearer scheme kept, token redacted",
			in:   "send Bearer abcdefgh12345678 now",
			want: "send Bearer " + SecretMarker + " now",
		},
		{
			name: "quoted credential value keeps its quotes",
			in:   `{"access_token": "a b c", "token_type": "bearer"}`,
			want: `{"access_token": "` + SecretMarker + `", "token_type": "bearer"}`,
		},
		{
			name: "unterminated PEM block redacted to the end",
			in:   "key:\n-----BEGIN PRIVATE KEY-----\nMIIB",
			want: "key:\n" + SecretMarker,
		},
		{
			name: "token counts are not credentials",
			in:   "max_tokens: 4096, input_tokens=12",
			want: "max_tokens: 4096, input_tokens=12",
		},
		{
			name: "dates, times and addresses are not phone numbers",
			in:   "2026-07-03T10:00:00Z from 192.168.100.10 build 20260703",
			want: "2026-07-03T10:00:00Z from 192.168.100.10 build 20260703",
		},
		{
			name: "PII off keeps phones too",
			cfg:  RedactorConfig{DisablePII: true},
			in:   "call 555-123-4567",
			want: "call 555-123-4567",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRedactor(tt.cfg)
			require.NoError(t, err)
			assert.Equal(t, tt.want, r.Text(tt.in))
		})
	}
}

func TestZeroRedactorAppliesPatternsAndPII(t *testing.T) {
	var r Redactor
	assert.Equal(t, SecretMarker+" "+PIIMarker, r.Text("AKIAIOSFODNN7EXAMPLE a@b.example"))
}

func TestNewRedactorRejectsRelativeHome(t *testing.T) {
	_, err := NewRedactor(RedactorConfig{Home: "home/op"})
	require.ErrorContains(t, err, `home "home/op": must be an absolute path`)
	r, err := NewRedactor(RedactorConfig{Home: "/"})
	require.NoError(t, err, "a root home is accepted and redacts nothing")
	assert.Equal(t, "/etc/x", r.Text("/etc/x"))
}

func TestSecretValuesFromEnv(t *testing.T) {
	env := map[string]string{"A": "alpha-secret", "EMPTY": ""}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	assert.Equal(t, []string{"alpha-secret"}, SecretValuesFromEnv([]string{"A", "EMPTY", "UNSET"}, lookup))
}

func TestRedactorConcurrentUse(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{SecretValues: []string{"hunter2"}, Home: "/home/op"})
	require.NoError(t, err)
	in := benchmarkText()
	want := r.Text(in)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				assert.Equal(t, want, r.Text(in))
			}
		})
	}
	wg.Wait()
}

// benchmarkText is about 1 KiB of agent output with a few secrets in it.
func benchmarkText() string {
	var b strings.Builder
	b.WriteString("Running tests in /home/op/project with token=ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345.\n")
	for b.Len() < 900 {
		b.WriteString("ok  \tgithub.com/example/pkg/module\t0.123s\tcoverage: 81.2% of statements\n")
	}
	b.WriteString("contact ops@example.com; Authorization: Bearer abc123.DEF-456_ghi~789; hunter2 done\n")
	return b.String()
}

func BenchmarkRedactorText(b *testing.B) {
	r, err := NewRedactor(RedactorConfig{SecretValues: []string{"hunter2"}, Home: "/home/op"})
	require.NoError(b, err)
	in := benchmarkText()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Text(in)
	}
}

func TestRedactorOperatorNamedKeys(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{SecretKeys: []string{"Deploy_Hook"}})
	require.NoError(t, err)
	in := map[string]any{"deploy_hook": "https://hooks.example/abc", "nested": []any{map[string]any{"DEPLOY_HOOK": json.Number("42")}}, "hook": "kept"}
	assert.Equal(t, map[string]any{
		"deploy_hook": SecretMarker,
		"nested":      []any{map[string]any{"DEPLOY_HOOK": SecretMarker}},
		"hook":        "kept",
	}, r.Value(in))
}
