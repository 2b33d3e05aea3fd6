package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// restart stores every state the engine changed since Begin, as the
// processor does after a batch, and builds a new engine from the store.
type store struct {
	sessions map[SessionKey][]byte
	agents   map[string][]byte
}

func (s *store) save(t *testing.T, c Changes) {
	for _, st := range c.Sessions {
		raw, err := Encode(st)
		require.NoError(t, err)
		s.sessions[SessionKey{st.Agent, st.Session}] = raw
	}
	for _, k := range c.Removed {
		delete(s.sessions, k)
	}
	for _, a := range c.Agents {
		raw, err := Encode(a)
		require.NoError(t, err)
		s.agents[a.Agent] = raw
	}
}

func (s *store) engine(t *testing.T, p *Policies, epoch int64) *Engine {
	e := New(p, func() int64 { return epoch }, 100)
	var sessions []*SessionState
	var agents []*AgentState
	for _, raw := range s.sessions {
		st, err := DecodeSession(raw)
		require.NoError(t, err)
		sessions = append(sessions, st)
	}
	for _, raw := range s.agents {
		a, err := DecodeAgent(raw)
		require.NoError(t, err)
		agents = append(agents, a)
	}
	e.Restore(sessions, agents)
	return e
}

func observe(e *Engine, i int, typ string, after time.Duration, data map[string]any) []Breach {
	at := t0.Add(after)
	e.Begin()
	return e.Observe(ev(i, typ, at, data), at)
}

// TestOncePerBreachAcrossRestart: totals and fired breaches survive a
// restart through their stored values; an event redelivered after the
// restart is not counted again, the next one continues the totals, and a
// breach fired before the restart does not fire again, while the
// engine's own positions continue in the stored epoch.
func TestOncePerBreachAcrossRestart(t *testing.T) {
	p := &Policies{Default: Rules{
		Session: Budget{CostUSD: Limit{Soft: 1, Hard: 2}},
		Agent:   Budget{Tokens: Limit{Soft: 100}}, Window: time.Hour,
	}}
	s := &store{sessions: map[SessionKey][]byte{}, agents: map[string][]byte{}}
	e := New(p, func() int64 { return 1 }, 100)

	e.Begin()
	got := e.Observe(ev(0, "run.finished", t0, finished(60, 60, 1.5)), t0)
	s.save(t, e.Pending())
	e.Commit()
	require.Len(t, got, 2)
	assert.Equal(t, BudgetAgentTokens, got[0].Policy)
	assert.Equal(t, BudgetSessionCost, got[1].Policy)

	e = s.engine(t, p, 2)
	assert.Empty(t, observe(e, 0, "run.finished", time.Second, finished(60, 60, 1.5)), "a redelivery is not counted again")
	got = observe(e, 1, "run.finished", 2*time.Second, finished(1, 1, 0.1))
	assert.Empty(t, got, "soft fired before the restart; 1.6 is under hard")
	got = observe(e, 2, "run.finished", 3*time.Second, finished(1, 1, 0.5))
	require.Len(t, got, 1, "the totals survived: 2.1 crosses hard")
	assert.Equal(t, Breach{Agent: "openhands", Session: "s1", Policy: BudgetSessionCost, Level: Hard,
		Value: 2.1, Threshold: 2, Cause: "e2", At: t0.Add(3 * time.Second), Epoch: 1, Seq: 2}, roundValue(got[0]))
}

func roundValue(b Breach) Breach {
	b.Value = float64(int(b.Value*1000+0.5)) / 1000
	return b
}

// TestRollback: a rolled back change set leaves the engine as before it,
// so the same events observed again cross the same breaches at the same
// positions.
func TestRollback(t *testing.T) {
	p := &Policies{Default: Rules{Session: Budget{Tokens: Limit{Hard: 10}}}}
	e := New(p, func() int64 { return 1 }, 100)
	e.Begin()
	first := e.Observe(ev(0, "run.finished", t0, finished(10, 10, -1)), t0)
	assert.True(t, e.Pending().KeysChanged, "a new session and agent")
	restored := e.Rollback()
	assert.Equal(t, []SessionKey{{"openhands", "s1"}}, restored.Removed, "the new session goes, from storage too")
	require.Len(t, restored.Agents, 1)
	assert.Empty(t, restored.Agents[0].Buckets, "the agent's spending is undone")
	e.Begin()
	again := e.Observe(ev(0, "run.finished", t0, finished(10, 10, -1)), t0)
	c := e.Pending()
	e.Commit()
	require.Len(t, first, 1)
	assert.Equal(t, first, again)
	assert.Len(t, c.Sessions, 1)

	e.Begin()
	assert.Len(t, e.Observe(ev(1, "run.finished", t0, finished(10, 10, -1)), t0), 0, "fired already")
	restored = e.Rollback()
	require.Len(t, restored.Sessions, 1, "the touched session is stored back as it was")
	assert.Equal(t, int64(1), restored.Sessions[0].Seq)
	assert.False(t, restored.KeysChanged)
}

// TestAgentWindow: an agent's usage counts across its sessions for the
// window; once it rolled out, the budget re-arms and fires again.
func TestAgentWindow(t *testing.T) {
	p := &Policies{Default: Rules{Agent: Budget{Tokens: Limit{Hard: 100}}, Window: time.Hour}}
	e := New(p, func() int64 { return 1 }, 100)
	in := func(i int, session string, after time.Duration, tokens int) []Breach {
		at := t0.Add(after)
		x := ev(i, "run.finished", at, finished(tokens, 0, -1))
		x.Session = session
		return e.Observe(x, at)
	}
	assert.Empty(t, in(0, "a", 0, 60))
	got := in(1, "b", time.Minute, 60)
	require.Len(t, got, 1, "two sessions of one agent share its budget")
	assert.Equal(t, "b", got[0].Session, "the breach lands in the session that crossed it")
	assert.Empty(t, in(2, "c", 2*time.Minute, 60), "fired once while over")
	assert.Empty(t, in(3, "a", 3*time.Hour, 60), "the window rolled: 60 is under")
	assert.Len(t, in(4, "a", 3*time.Hour+time.Minute, 60), 1, "re-armed, it fires again")
}

// TestEviction: past maxSessions the longest-quiet session goes, and its
// removal is a change to store.
func TestEviction(t *testing.T) {
	e := New(&Policies{}, func() int64 { return 1 }, 2)
	for i, s := range []string{"a", "b", "c"} {
		x := ev(i, "progress.status", t0.Add(time.Duration(i)*time.Second), nil)
		x.Session = s
		e.Begin()
		e.Observe(x, t0.Add(time.Duration(i)*time.Second))
		c := e.Pending()
		e.Commit()
		if s == "c" {
			assert.Equal(t, []SessionKey{{"openhands", "a"}}, c.Removed)
		}
	}
	assert.Len(t, e.sessions, 2)
}

func TestDecodeRefusesOtherVersions(t *testing.T) {
	_, err := DecodeSession([]byte(`{"v":2}`))
	assert.ErrorIs(t, err, ErrVersion)
	_, err = DecodeAgent([]byte(`{"v":0}`))
	assert.ErrorIs(t, err, ErrVersion)
	_, err = DecodeSession([]byte(`{`))
	assert.Error(t, err)
}

// TestUnsentSurvivesRestart: a breach whose delivery was not reported is
// stored with its session and is unsent after a restart, at its position;
// reported delivered, it is not.
func TestUnsentSurvivesRestart(t *testing.T) {
	p := &Policies{Default: Rules{Session: Budget{Tokens: Limit{Hard: 10}}}}
	s := &store{sessions: map[SessionKey][]byte{}, agents: map[string][]byte{}}
	e := New(p, func() int64 { return 1 }, 100)
	fired := observe(e, 0, "run.finished", 0, finished(10, 10, -1))
	s.save(t, e.Pending())
	e.Commit()
	require.Len(t, fired, 1)

	e = s.engine(t, p, 2)
	assert.Equal(t, fired, e.Unsent(), "sent again after the restart, the same breach")
	e.Delivered(fired)
	assert.Empty(t, e.Unsent())
}
