package capture

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamChunks feeds chunks to a fresh stream of r and returns every
// output, Flush's last.
func streamChunks(r *Redactor, chunks []string) []string {
	s := r.Stream()
	outs := make([]string, 0, len(chunks)+1)
	for _, c := range chunks {
		outs = append(outs, s.Write(c))
	}
	return append(outs, s.Flush())
}

// randomSplit cuts s at random byte offsets into 1..len(s) pieces.
func randomSplit(rng *rand.Rand, s string) []string {
	var chunks []string
	for len(s) > 0 {
		n := 1 + rng.IntN(min(len(s), 1+rng.IntN(12)))
		chunks = append(chunks, s[:n])
		s = s[n:]
	}
	return chunks
}

func perByte(s string) []string {
	chunks := make([]string, len(s))
	for i := range s {
		chunks[i] = s[i : i+1]
	}
	return chunks
}

// assertStreamed checks one streamed run: no single output and not their
// concatenation leaks, and the concatenation is what Text makes of the
// whole input.
func assertStreamed(t *testing.T, r *Redactor, chunks []string, leaks []string) {
	t.Helper()
	outs := streamChunks(r, chunks)
	joined := strings.Join(outs, "")
	for _, leak := range leaks {
		for i, out := range outs {
			require.NotContains(t, out, leak, "output %d of split %q", i, chunks)
		}
		require.NotContains(t, joined, leak, "split %q", chunks)
	}
	require.Equal(t, r.Text(strings.Join(chunks, "")), joined, "split %q", chunks)
}

func TestStreamRedactorSplitSecret(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{SecretValues: []string{"hunter2", "correct horse battery"}, Home: "/Users/Jane Doe"})
	require.NoError(t, err)
	tests := []struct {
		name   string
		chunks []string
		leaks  []string
	}{
		{name: "configured secret in two pieces", chunks: []string{"pw is hunt", "er2 ok"}, leaks: []string{"hunter2"}},
		{name: "configured secret one byte at a time", chunks: perByte("pw is hunter2 ok"), leaks: []string{"hunter2"}},
		{name: "configured secret with spaces", chunks: perByte("say correct horse battery staple"), leaks: []string{"correct horse battery"}},
		{name: "configured home with a space", chunks: perByte("at /Users/Jane Doe/notes.txt"), leaks: []string{"Jane Doe"}},
		{name: "sk- key", chunks: perByte("use sk-proj-AbCdEf123456GhIjKl789012 now"), leaks: []string{"sk-proj-AbCdEf123456GhIjKl789012"}},
		{name: "ghp_ token", chunks: []string{"clone ghp_AbCdEfGh", "IjKlMnOpQrStUvWxYz012345", " now"}, leaks: []string{"ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345"}},
		{name: "Bearer token after the scheme", chunks: []string{"Authorization: Bearer ", "abc123DEF456", "ghi789\n"}, leaks: []string{"abc123DEF456ghi789"}},
		{name: "bare bearer scheme", chunks: []string{"send bearer ", "abcdefgh12345678", " done"}, leaks: []string{"abcdefgh12345678"}},
		{name: "password assignment with spaces", chunks: perByte("password : hunter2sequel\nnext"), leaks: []string{"hunter2sequel"}},
		{name: "quoted value with spaces", chunks: perByte(`{"password": "correct staple gun"} done`), leaks: []string{"staple gun"}},
		{name: "value on the next line", chunks: []string{"token=", "\n", "ZX12abcdef", " x"}, leaks: []string{"ZX12abcdef"}},
		{name: "PEM block", chunks: perByte("k\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\n-----END RSA PRIVATE KEY-----\nok"), leaks: []string{"MIIEowIBAAKCAQEA7bq", "BEGIN RSA"}},
		{name: "email", chunks: perByte("mail jane.doe+test@example.co.uk now"), leaks: []string{"jane.doe+test@example.co.uk", "jane.doe"}},
		{name: "phone", chunks: perByte("call +1 (555) 123-4567 tomorrow"), leaks: []string{"555) 123-4567", "+1 "}},
		{name: "JWT", chunks: perByte("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fwpM done"), leaks: []string{"eyJhbGciOiJIUzI1NiJ9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertStreamed(t, r, tt.chunks, tt.leaks)
		})
	}
}

// TestStreamRedactorRandomSplits is the streaming property: random splits
// of every corpus input never leak a must_not_contain string, in any output
// or in their concatenation, and concatenate to Text of the whole.
func TestStreamRedactorRandomSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range loadRedactionCorpus(t).TextCases {
		t.Run(c.Name, func(t *testing.T) {
			r := c.redactor(t)
			in := c.textInput(t)
			assertStreamed(t, r, perByte(in), c.MustNotContain)
			for range 100 {
				assertStreamed(t, r, randomSplit(rng, in), c.MustNotContain)
			}
		})
	}
}

// FuzzStreamRedactor checks the streaming property on arbitrary text and
// splits: the concatenated output is exactly Text of the whole input.
func FuzzStreamRedactor(f *testing.F) {
	for _, c := range loadRedactionCorpus(f).TextCases {
		var in string
		require.NoError(f, json.Unmarshal(c.Input, &in))
		f.Add(in, uint64(len(in)))
	}
	r, err := NewRedactor(RedactorConfig{SecretValues: []string{"hunter2", "correct horse"}, Home: "/srv/o p"})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, in string, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0))
		joined := strings.Join(streamChunks(r, randomSplit(rng, in)), "")
		require.Equal(t, r.Text(in), joined)
	})
}

func TestStreamRedactorReleasesEagerly(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{SecretValues: []string{"hunter2"}})
	require.NoError(t, err)
	s := r.Stream()
	assert.Equal(t, "plain words ", s.Write("plain words "))
	assert.Equal(t, "", s.Write("hun"), "a possible secret prefix is held")
	assert.Equal(t, "", s.Write("ter2"))
	assert.Equal(t, SecretMarker+" ", s.Write(" "))
	assert.Equal(t, "", s.Write(""))
	assert.Equal(t, "", s.Write("tail"), "the last word may still grow")
	assert.Equal(t, "tail", s.Flush())
	assert.Equal(t, "", s.Flush(), "Flush empties the stream")
	assert.Equal(t, "again ", s.Write("again "), "the stream is reusable after Flush")
}

func TestStreamRedactorCapsHeldText(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{})
	require.NoError(t, err)
	secret := strings.Repeat("A1b2C3d4", (maxHeld+4096)/8)

	t.Run("secret run longer than the cap", func(t *testing.T) {
		s := r.Stream()
		var out strings.Builder
		out.WriteString(s.Write("x password="))
		for i := 0; i < len(secret); i += 7 {
			out.WriteString(s.Write(secret[i:min(len(secret), i+7)]))
			require.LessOrEqual(t, len(s.buf), maxHeld+8, "held text stays bounded")
		}
		out.WriteString(s.Write(" after"))
		out.WriteString(s.Flush())
		assert.NotContains(t, out.String(), "A1b2C3d4")
		assert.Equal(t, "x password="+SecretMarker+" after", out.String())
	})

	t.Run("PEM block longer than the cap", func(t *testing.T) {
		s := r.Stream()
		var out strings.Builder
		out.WriteString(s.Write("key\n-----BEGIN PRIVATE KEY-----\n"))
		for i := 0; i < len(secret); i += 64 {
			out.WriteString(s.Write(secret[i:min(len(secret), i+64)] + "\n"))
			require.LessOrEqual(t, len(s.buf), maxHeld+128, "held text stays bounded")
		}
		out.WriteString(s.Write("-----END PRIV"))
		out.WriteString(s.Write("ATE KEY-----\nafter\n"))
		out.WriteString(s.Flush())
		assert.NotContains(t, out.String(), "A1b2C3d4")
		assert.Equal(t, "key\n"+SecretMarker+"\nafter\n", out.String())
	})
}

func TestStreamRedactorCapKeepsASecretStartHeld(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{SecretValues: []string{"hunter2"}})
	require.NoError(t, err)
	run := strings.Repeat("a", maxHeld)
	outs := streamChunks(r, []string{run, "aaaahunt", "er2 done"})
	require.Equal(t, run+"aaaa", outs[1], "the cap releases the run but not the secret's start")
	joined := strings.Join(outs, "")
	assert.NotContains(t, joined, "hunt")
	assert.Equal(t, run+"aaaa"+SecretMarker+" done", joined)
}

func BenchmarkStreamRedactor(b *testing.B) {
	r, err := NewRedactor(RedactorConfig{SecretValues: []string{"hunter2"}, Home: "/home/op"})
	require.NoError(b, err)
	in := benchmarkText()
	var chunks []string
	for i := 0; i < len(in); i += 4 {
		chunks = append(chunks, in[i:min(len(in), i+4)])
	}
	s := r.Stream()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range chunks {
			s.Write(c)
		}
		s.Flush()
	}
}
