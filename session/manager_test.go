package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
	"github.com/agentmesh/agentmesh/internal/harness/logtest"
	"github.com/agentmesh/agentmesh/session"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// clock is a settable clock for Options.Now.
type clock = clocktest.Clock

func newClock() *clock { return clocktest.New(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)) }

// stores are the backends the Manager tests run against.
var stores = map[string]func(t *testing.T) session.Store{
	"memstore": func(t *testing.T) session.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	},
	"boltstore": func(t *testing.T) session.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "mesh.db"), nil)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	},
}

// newManager returns a Manager over a new memstore with clk as its clock.
func newManager(t *testing.T, clk *clock, opts *session.Options) (*session.Manager, *memstore.Store) {
	t.Helper()
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	var o session.Options
	if opts != nil {
		o = *opts
	}
	o.Now = clk.Now
	m, err := session.NewManager(store, &o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m, store
}

func start(t *testing.T, m *session.Manager, user string) session.Session {
	t.Helper()
	s, created, err := m.GetOrCreate(t.Context(), session.Params{UserID: user, ActiveAgent: "finance"})
	require.NoError(t, err)
	require.True(t, created)
	return s
}

func userTurn(content string) session.Turn {
	return session.Turn{Role: session.RoleUser, Content: content}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestGetOrCreate(t *testing.T) {
	clk := newClock()
	m, _ := newManager(t, clk, nil)
	s, created, err := m.GetOrCreate(t.Context(), session.Params{
		UserID: "alice", EmployeeID: "E1", ActiveAgent: "finance", Metadata: map[string]any{"entry_point": "slack"},
	})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Regexp(t, uuidV4, s.ID)
	assert.Equal(t, "alice", s.UserID)
	assert.Equal(t, "E1", s.EmployeeID)
	assert.Equal(t, session.StatusActive, s.Status)
	assert.Equal(t, "finance", s.ActiveAgent)
	assert.Equal(t, []session.Turn{}, s.TurnHistory)
	assert.Equal(t, map[string]any{}, s.WorkflowState)
	assert.Equal(t, map[string]any{"entry_point": "slack"}, s.Metadata)
	assert.Equal(t, clk.Now(), s.CreatedAt)
	assert.Equal(t, clk.Now(), s.UpdatedAt)
	assert.Equal(t, clk.Now().Add(session.DefaultTTL), s.ExpiresAt)

	again, created, err := m.GetOrCreate(t.Context(), session.Params{UserID: "alice", ActiveAgent: "hr"})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, s.ID, again.ID)
	assert.Equal(t, "finance", again.ActiveAgent, "an existing session keeps its agent")

	other := start(t, m, "bob")
	assert.NotEqual(t, s.ID, other.ID)
	active, err := m.Active(t.Context(), "alice")
	require.NoError(t, err)
	assert.Equal(t, s.ID, active.ID)

	for _, p := range []session.Params{
		{},
		{UserID: strings.Repeat("u", session.MaxUserIDLen+1)},
		{UserID: "carol", EmployeeID: strings.Repeat("e", session.MaxUserIDLen+1)},
	} {
		_, _, err := m.GetOrCreate(t.Context(), p)
		assert.ErrorIs(t, err, session.ErrInvalid)
	}
	_, err = m.Active(t.Context(), "")
	assert.ErrorIs(t, err, session.ErrInvalid)
	_, err = m.Active(t.Context(), "nobody")
	assert.ErrorIs(t, err, session.ErrNotFound)
	assert.NotErrorIs(t, err, session.ErrExpired)
}

func TestSlidingTTL(t *testing.T) {
	clk := newClock()
	t0 := clk.Now()
	m, _ := newManager(t, clk, nil)
	s := start(t, m, "alice")
	assert.Equal(t, t0.Add(30*time.Minute), s.ExpiresAt)

	clk.Advance(20 * time.Minute)
	s, err := m.AppendTurns(t.Context(), s.ID, userTurn("still here"))
	require.NoError(t, err)
	assert.Equal(t, t0.Add(50*time.Minute), s.ExpiresAt, "a turn slides the expiry to now + TTL")
	assert.Equal(t, t0.Add(20*time.Minute), s.TurnHistory[0].Timestamp, "a zero timestamp becomes now")

	// Other changes do not slide it.
	clk.Advance(10 * time.Minute)
	s, err = m.SetWorkflowState(t.Context(), s.ID, map[string]any{"step": 2})
	require.NoError(t, err)
	assert.Equal(t, t0.Add(50*time.Minute), s.ExpiresAt)
	assert.Equal(t, t0.Add(30*time.Minute), s.UpdatedAt)

	clk.Advance(19*time.Minute + 59*time.Second)
	_, err = m.Active(t.Context(), "alice")
	require.NoError(t, err, "a second before expiry")

	clk.Advance(time.Second) // exactly at ExpiresAt: gone
	_, err = m.Active(t.Context(), "alice")
	assert.ErrorIs(t, err, session.ErrExpired)
	assert.ErrorIs(t, err, session.ErrNotFound, "expired counts as not found")
	_, err = m.Get(t.Context(), s.ID)
	assert.ErrorIs(t, err, session.ErrExpired)
	_, err = m.AppendTurns(t.Context(), s.ID, userTurn("too late"))
	assert.ErrorIs(t, err, session.ErrExpired)
	_, err = m.CloseSession(t.Context(), s.ID, session.StatusCompleted)
	assert.ErrorIs(t, err, session.ErrExpired)

	// The next message starts a new session: the expired one counts as
	// gone and is closed abandoned in the same write.
	next, created, err := m.GetOrCreate(t.Context(), session.Params{UserID: "alice", ActiveAgent: "hr"})
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotEqual(t, s.ID, next.ID)
	assert.Equal(t, clk.Now().Add(session.DefaultTTL), next.ExpiresAt)
	n, err := m.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the expired session is left for the sweep")
	_, err = m.Get(t.Context(), s.ID)
	assert.ErrorIs(t, err, session.ErrNotFound)
	assert.NotErrorIs(t, err, session.ErrExpired)
}

func TestExpiredSessionIsClosedAbandoned(t *testing.T) {
	clk := newClock()
	m, store := newManager(t, clk, &session.Options{TTL: time.Minute})
	s := start(t, m, "alice")
	clk.Advance(time.Minute)
	_, created, err := m.GetOrCreate(t.Context(), session.Params{UserID: "alice"})
	require.NoError(t, err)
	require.True(t, created)
	old, err := store.GetSession(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusAbandoned, old.Status, "no dangling active session")
	assert.Equal(t, s.ExpiresAt, old.ExpiresAt, "its expiry stays in the past")
}

func TestTurnCap(t *testing.T) {
	for _, max := range []int{1, 3, 100} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			m, _ := newManager(t, newClock(), &session.Options{MaxTurns: max})
			s := start(t, m, "alice")
			var err error
			for i := range max + 5 {
				s, err = m.AppendTurns(t.Context(), s.ID, userTurn(fmt.Sprint(i)))
				require.NoError(t, err)
				require.LessOrEqual(t, len(s.TurnHistory), max)
			}
			require.Len(t, s.TurnHistory, max)
			assert.Equal(t, fmt.Sprint(max+4), s.TurnHistory[max-1].Content, "the newest is kept")
			assert.Equal(t, "5", s.TurnHistory[0].Content, "the oldest are dropped")

			// One call with more turns than the cap keeps its last ones.
			batch := make([]session.Turn, max+2)
			for i := range batch {
				batch[i] = userTurn(fmt.Sprint("b", i))
			}
			s, err = m.AppendTurns(t.Context(), s.ID, batch...)
			require.NoError(t, err)
			require.Len(t, s.TurnHistory, max)
			assert.Equal(t, fmt.Sprint("b", max+1), s.TurnHistory[max-1].Content)
			got, err := m.Get(t.Context(), s.ID)
			require.NoError(t, err)
			assert.Equal(t, s.TurnHistory, got.TurnHistory)
		})
	}
}

func TestAppendTurns(t *testing.T) {
	clk := newClock()
	m, _ := newManager(t, clk, nil)
	s := start(t, m, "alice")
	at := clk.Now().Add(-time.Hour)
	s, err := m.AppendTurns(t.Context(), s.ID,
		session.Turn{Role: session.RoleUser, Content: "hi", Timestamp: at, IntentSummary: "greeting"},
		session.Turn{Role: session.RoleAgent, Content: "hello"})
	require.NoError(t, err)
	assert.Equal(t, []session.Turn{
		{Role: session.RoleUser, Content: "hi", Timestamp: at, IntentSummary: "greeting"},
		{Role: session.RoleAgent, Content: "hello", Timestamp: clk.Now()},
	}, s.TurnHistory)

	_, err = m.AppendTurns(t.Context(), s.ID, session.Turn{Role: "system", Content: "x"})
	assert.ErrorIs(t, err, session.ErrInvalid)
	_, err = m.AppendTurns(t.Context(), "no-such-session", userTurn("x"))
	assert.ErrorIs(t, err, session.ErrNotFound)

	// With no turns, it only slides the expiry.
	clk.Advance(time.Minute)
	s, err = m.AppendTurns(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Len(t, s.TurnHistory, 2)
	assert.Equal(t, clk.Now().Add(session.DefaultTTL), s.ExpiresAt)
}

// TestConcurrentTurnsAndCreates is the stress test of the session rules
// (docs/API.md#sessions: one active session per user, no turn lost): many
// first messages of several users at once, each appending a user turn and
// an agent turn. Every user ends with one session holding every turn.
func TestConcurrentTurnsAndCreates(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			const users, perUser = 4, 32
			m, err := session.NewManager(open(t), &session.Options{MaxTurns: 2 * perUser})
			require.NoError(t, err)
			var (
				wg      sync.WaitGroup
				gate    = make(chan struct{})
				created [users]atomic.Int32
				ids     [users][perUser]string
			)
			for u := range users {
				for g := range perUser {
					wg.Go(func() {
						<-gate
						user := fmt.Sprintf("user-%d", u)
						s, made, err := m.GetOrCreate(t.Context(), session.Params{UserID: user, ActiveAgent: "finance"})
						if !assert.NoError(t, err) {
							return
						}
						if made {
							created[u].Add(1)
						}
						ids[u][g] = s.ID
						msg := fmt.Sprintf("%02d", g)
						_, err = m.AppendTurns(t.Context(), s.ID,
							session.Turn{Role: session.RoleUser, Content: "q" + msg},
							session.Turn{Role: session.RoleAgent, Content: "a" + msg})
						assert.NoError(t, err)
					})
				}
			}
			close(gate)
			wg.Wait()
			for u := range users {
				user := fmt.Sprintf("user-%d", u)
				assert.Equal(t, int32(1), created[u].Load(), "%s: exactly one session created", user)
				active, err := m.Active(t.Context(), user)
				require.NoError(t, err)
				for g := range perUser {
					assert.Equal(t, active.ID, ids[u][g], "%s: message %d got another session", user, g)
				}
				require.Len(t, active.TurnHistory, 2*perUser, "%s: no turn lost", user)
				seen := map[string]bool{}
				for i := 0; i < len(active.TurnHistory); i += 2 {
					q, a := active.TurnHistory[i], active.TurnHistory[i+1]
					assert.Equal(t, session.RoleUser, q.Role)
					assert.Equal(t, "a"+q.Content[1:], a.Content, "a call's turns are contiguous")
					assert.False(t, seen[q.Content], "turn %s twice", q.Content)
					seen[q.Content] = true
				}
			}
		})
	}
}

func TestCloseSession(t *testing.T) {
	for _, st := range []session.Status{session.StatusCompleted, session.StatusAbandoned, session.StatusError} {
		t.Run(string(st), func(t *testing.T) {
			clk := newClock()
			m, _ := newManager(t, clk, &session.Options{Retention: time.Hour})
			s := start(t, m, "alice")
			_, err := m.SetClarification(t.Context(), s.ID, "hr", "leave?")
			require.NoError(t, err)
			clk.Advance(time.Minute)
			closed, err := m.CloseSession(t.Context(), s.ID, st)
			require.NoError(t, err)
			assert.Equal(t, st, closed.Status)
			assert.Equal(t, clk.Now(), closed.UpdatedAt)
			assert.Equal(t, clk.Now().Add(time.Hour), closed.ExpiresAt, "kept for the retention")
			assert.Nil(t, closed.PendingClarification)

			_, err = m.Active(t.Context(), "alice")
			assert.ErrorIs(t, err, session.ErrNotFound, "closing frees the user's slot")
			got, err := m.Get(t.Context(), s.ID)
			require.NoError(t, err)
			assert.Equal(t, st, got.Status, "a closed session stays readable")

			_, err = m.CloseSession(t.Context(), s.ID, session.StatusAbandoned)
			assert.ErrorIs(t, err, session.ErrNotActive, "closing twice")
			_, err = m.AppendTurns(t.Context(), s.ID, userTurn("x"))
			assert.ErrorIs(t, err, session.ErrNotActive)
			_, err = m.SetWorkflowState(t.Context(), s.ID, nil)
			assert.ErrorIs(t, err, session.ErrNotActive)
			_, err = m.TakeClarification(t.Context(), s.ID)
			assert.ErrorIs(t, err, session.ErrNotActive)
			got, err = m.Get(t.Context(), s.ID)
			require.NoError(t, err)
			assert.Equal(t, closed, got, "refused changes write nothing")

			next, created, err := m.GetOrCreate(t.Context(), session.Params{UserID: "alice"})
			require.NoError(t, err)
			assert.True(t, created)
			assert.NotEqual(t, s.ID, next.ID)

			clk.Advance(time.Hour)
			_, err = m.Get(t.Context(), s.ID)
			assert.ErrorIs(t, err, session.ErrExpired, "past its retention")
		})
	}
	m, _ := newManager(t, newClock(), nil)
	s := start(t, m, "alice")
	for _, st := range []session.Status{session.StatusActive, "", "closed"} {
		_, err := m.CloseSession(t.Context(), s.ID, st)
		assert.ErrorIs(t, err, session.ErrInvalid, "status %q", st)
	}
	_, err := m.CloseSession(t.Context(), "missing", session.StatusCompleted)
	assert.ErrorIs(t, err, session.ErrNotFound)
}

func TestResume(t *testing.T) {
	clk := newClock()
	m, _ := newManager(t, clk, &session.Options{MaxTurns: 3})
	prior := start(t, m, "alice")
	_, err := m.AppendTurns(t.Context(), prior.ID, userTurn("1"), userTurn("2"), userTurn("3"))
	require.NoError(t, err)
	_, err = m.SetWorkflowState(t.Context(), prior.ID, map[string]any{"step": "dates"})
	require.NoError(t, err)
	_, err = m.Update(t.Context(), prior.ID, func(s *session.Session) error {
		s.EmployeeID = "E1"
		s.Metadata = map[string]any{"entry_point": "slack"}
		return nil
	})
	require.NoError(t, err)
	_, err = m.CloseSession(t.Context(), prior.ID, session.StatusError)
	require.NoError(t, err)

	t.Run("AnotherUserIsForbidden", func(t *testing.T) {
		_, err := m.Resume(t.Context(), prior.ID, "mallory")
		assert.ErrorIs(t, err, session.ErrForbidden)
		got, err := m.Get(t.Context(), prior.ID)
		require.NoError(t, err)
		assert.Equal(t, session.StatusError, got.Status, "a refused resume changes nothing")
		_, err = m.Active(t.Context(), "mallory")
		assert.ErrorIs(t, err, session.ErrNotFound)
		_, err = m.Resume(t.Context(), prior.ID, "")
		assert.ErrorIs(t, err, session.ErrInvalid)
	})

	// alice has moved on to another conversation meanwhile.
	clk.Advance(time.Minute)
	current := start(t, m, "alice")

	r, err := m.Resume(t.Context(), prior.ID, "alice")
	require.NoError(t, err)
	assert.Regexp(t, uuidV4, r.ID)
	assert.NotEqual(t, prior.ID, r.ID)
	assert.Equal(t, session.StatusActive, r.Status)
	assert.Equal(t, "alice", r.UserID)
	assert.Equal(t, "E1", r.EmployeeID)
	assert.Equal(t, "finance", r.ActiveAgent)
	assert.Equal(t, []string{"1", "2", "3"}, contents(r.TurnHistory))
	assert.Equal(t, map[string]any{"step": "dates"}, r.WorkflowState)
	assert.Equal(t, map[string]any{"entry_point": "slack", session.MetadataResumedFrom: prior.ID}, r.Metadata)
	assert.Equal(t, clk.Now(), r.CreatedAt)
	assert.Equal(t, clk.Now().Add(session.DefaultTTL), r.ExpiresAt)

	active, err := m.Active(t.Context(), "alice")
	require.NoError(t, err)
	assert.Equal(t, r.ID, active.ID, "the resumed session is the active one")
	got, err := m.Get(t.Context(), prior.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusCompleted, got.Status, "the prior is closed completed")
	got, err = m.Get(t.Context(), current.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusAbandoned, got.Status, "the session it replaced is abandoned")

	// Resuming the active session itself: it is completed, and its history
	// (capped) carries over.
	_, err = m.AppendTurns(t.Context(), r.ID, userTurn("4"))
	require.NoError(t, err)
	r2, err := m.Resume(t.Context(), r.ID, "alice")
	require.NoError(t, err)
	assert.Equal(t, []string{"2", "3", "4"}, contents(r2.TurnHistory))
	got, err = m.Get(t.Context(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StatusCompleted, got.Status)
	active, err = m.Active(t.Context(), "alice")
	require.NoError(t, err)
	assert.Equal(t, r2.ID, active.ID)

	_, err = m.Resume(t.Context(), "missing", "alice")
	assert.ErrorIs(t, err, session.ErrNotFound)
	clk.Advance(session.DefaultRetention)
	_, err = m.Resume(t.Context(), prior.ID, "alice")
	assert.ErrorIs(t, err, session.ErrExpired, "a session past its retention cannot be resumed")
}

func contents(turns []session.Turn) []string {
	out := make([]string, len(turns))
	for i, t := range turns {
		out[i] = t.Content
	}
	return out
}

func TestConcurrentResumeAndMessages(t *testing.T) {
	// Resumes racing first messages of the same user never leave two
	// active sessions.
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			m, err := session.NewManager(open(t), nil)
			require.NoError(t, err)
			prior := start(t, m, "alice")
			_, err = m.CloseSession(t.Context(), prior.ID, session.StatusCompleted)
			require.NoError(t, err)
			var wg sync.WaitGroup
			var made sync.Map
			for g := range 16 {
				wg.Go(func() {
					if g%2 == 0 {
						r, err := m.Resume(t.Context(), prior.ID, "alice")
						if assert.NoError(t, err) {
							made.Store(r.ID, true)
						}
						return
					}
					s, _, err := m.GetOrCreate(t.Context(), session.Params{UserID: "alice"})
					if assert.NoError(t, err) {
						made.Store(s.ID, true)
					}
				})
			}
			wg.Wait()
			activeCount := 0
			made.Range(func(id, _ any) bool {
				s, err := m.Get(t.Context(), id.(string))
				require.NoError(t, err)
				if s.Status == session.StatusActive {
					activeCount++
				}
				return true
			})
			assert.Equal(t, 1, activeCount, "exactly one active session")
		})
	}
}

func TestClarification(t *testing.T) {
	clk := newClock()
	m, _ := newManager(t, clk, nil)
	s := start(t, m, "alice")
	c, err := m.TakeClarification(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Nil(t, c, "none pending")

	s, err = m.SetClarification(t.Context(), s.ID, "hr", "leave policy?")
	require.NoError(t, err)
	want := session.Clarification{SuggestedAgent: "hr", OriginalInput: "leave policy?", Expires: clk.Now().Add(5 * time.Minute)}
	require.NotNil(t, s.PendingClarification)
	assert.Equal(t, want, *s.PendingClarification)
	got, err := m.Get(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, &want, got.PendingClarification, "stored with the session")

	clk.Advance(5*time.Minute - time.Second)
	c, err = m.TakeClarification(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, &want, c)
	c, err = m.TakeClarification(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Nil(t, c, "taken once")

	// A clarification that lapsed is hidden from reads and not returned.
	_, err = m.SetClarification(t.Context(), s.ID, "it", "laptop?")
	require.NoError(t, err)
	clk.Advance(5 * time.Minute)
	got, err = m.Get(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Nil(t, got.PendingClarification, "a lapsed clarification is not shown")
	c, err = m.TakeClarification(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Nil(t, c, "a lapsed clarification is not returned")

	// Concurrent takes: exactly one gets it.
	_, err = m.SetClarification(t.Context(), s.ID, "hr", "again")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var taken atomic.Int32
	for range 16 {
		wg.Go(func() {
			c, err := m.TakeClarification(t.Context(), s.ID)
			if assert.NoError(t, err) && c != nil {
				taken.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), taken.Load())

	// A custom TTL.
	m2, _ := newManager(t, clk, &session.Options{ClarificationTTL: time.Minute})
	s2 := start(t, m2, "bob")
	s2, err = m2.SetClarification(t.Context(), s2.ID, "hr", "x")
	require.NoError(t, err)
	assert.Equal(t, clk.Now().Add(time.Minute), s2.PendingClarification.Expires)
}

func TestWorkflowStateAndUpdate(t *testing.T) {
	clk := newClock()
	m, _ := newManager(t, clk, &session.Options{MaxTurns: 2})
	s := start(t, m, "alice")
	state := map[string]any{"step": "a", "nested": map[string]any{"k": 1.0}}
	s, err := m.SetWorkflowState(t.Context(), s.ID, state)
	require.NoError(t, err)
	state["nested"].(map[string]any)["k"] = 2.0 // the caller's map is not kept
	s, err = m.SetWorkflowState(t.Context(), s.ID, map[string]any{"other": true})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"other": true}, s.WorkflowState, "replaced whole, not merged")
	s, err = m.SetWorkflowState(t.Context(), s.ID, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, s.WorkflowState)

	s, err = m.SetActiveAgent(t.Context(), s.ID, "hr")
	require.NoError(t, err)
	assert.Equal(t, "hr", s.ActiveAgent)

	// Update keeps the fields it does not own.
	before := s
	clk.Advance(time.Minute)
	s, err = m.Update(t.Context(), s.ID, func(x *session.Session) error {
		x.ID, x.UserID, x.Status = "other", "mallory", session.StatusCompleted
		x.ExpiresAt = time.Time{}
		x.Metadata = map[string]any{"k": "v"}
		x.TurnHistory = []session.Turn{userTurn("1"), userTurn("2"), userTurn("3")}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, before.ID, s.ID)
	assert.Equal(t, "alice", s.UserID)
	assert.Equal(t, session.StatusActive, s.Status)
	assert.Equal(t, before.ExpiresAt, s.ExpiresAt)
	assert.Equal(t, clk.Now(), s.UpdatedAt)
	assert.Equal(t, map[string]any{"k": "v"}, s.Metadata)
	assert.Equal(t, []string{"2", "3"}, contents(s.TurnHistory), "capped")
	errNo := errors.New("no")
	_, err = m.Update(t.Context(), s.ID, func(x *session.Session) error {
		x.ActiveAgent = "changed"
		return errNo
	})
	assert.ErrorIs(t, err, errNo)
	got, err := m.Get(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, "hr", got.ActiveAgent, "a failed update writes nothing")
}

func TestSweep(t *testing.T) {
	clk := newClock()
	m, _ := newManager(t, clk, &session.Options{TTL: time.Minute, Retention: time.Hour})
	a := start(t, m, "a")
	b := start(t, m, "b")
	_, err := m.CloseSession(t.Context(), b.ID, session.StatusCompleted) // kept an hour
	require.NoError(t, err)
	clk.Advance(30 * time.Second)
	c := start(t, m, "c")

	clk.Advance(30 * time.Second) // a expired; c has 30 s left
	n, err := m.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = m.Get(t.Context(), a.ID)
	assert.ErrorIs(t, err, session.ErrNotFound)
	for _, id := range []string{b.ID, c.ID} {
		_, err = m.Get(t.Context(), id)
		assert.NoError(t, err)
	}
	_, err = m.Active(t.Context(), "a")
	assert.ErrorIs(t, err, session.ErrNotFound)

	clk.Advance(time.Hour)
	n, err = m.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, n, "c expired, b past its retention")
}

func TestSweeperGoroutine(t *testing.T) {
	clk := newClock()
	store := memstore.New()
	defer store.Close()
	m, err := session.NewManager(store, &session.Options{Now: clk.Now, SweepInterval: time.Millisecond, TTL: time.Minute})
	require.NoError(t, err)
	s := start(t, m, "alice")
	clk.Advance(time.Minute)
	require.Eventually(t, func() bool {
		_, err := store.GetSession(t.Context(), s.ID)
		return errors.Is(err, session.ErrNotFound)
	}, 5*time.Second, time.Millisecond, "the owned sweeper deletes expired sessions")

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, m.Close()) })
	}
	wg.Wait()
	require.NoError(t, m.Close(), "Close is idempotent")

	// After Close the sweeper is gone but the Manager works.
	s = start(t, m, "bob")
	clk.Advance(time.Minute)
	time.Sleep(10 * time.Millisecond)
	_, err = store.GetSession(t.Context(), s.ID)
	assert.NoError(t, err, "no sweeping after Close")
	n, err := m.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestSweeperLogsFailures(t *testing.T) {
	var buf logtest.Buffer
	store := memstore.New()
	require.NoError(t, store.Close()) // every sweep fails
	m, err := session.NewManager(store, &session.Options{
		SweepInterval: time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(&buf, nil)),
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "session: sweep failed") }, 5*time.Second, time.Millisecond)
	require.NoError(t, m.Close())
}

func TestStoreErrorsAreWrapped(t *testing.T) {
	store := memstore.New()
	m, err := session.NewManager(store, nil)
	require.NoError(t, err)
	s := start(t, m, "alice")
	require.NoError(t, store.Close())
	_, err = m.Get(t.Context(), s.ID)
	assert.ErrorIs(t, err, memstore.ErrClosed)
	_, err = m.AppendTurns(t.Context(), s.ID, userTurn("x"))
	assert.ErrorIs(t, err, memstore.ErrClosed)
	_, _, err = m.GetOrCreate(t.Context(), session.Params{UserID: "alice"})
	assert.ErrorIs(t, err, memstore.ErrClosed)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m2, _ := newManager(t, newClock(), nil)
	_, _, err = m2.GetOrCreate(ctx, session.Params{UserID: "alice"})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestZeroAndNilManager(t *testing.T) {
	_, err := session.NewManager(nil, nil)
	assert.Error(t, err)

	var m session.Manager
	assert.NoError(t, m.Close())
	_, err = m.Get(t.Context(), "x")
	assert.Error(t, err)
	_, _, err = m.GetOrCreate(t.Context(), session.Params{UserID: "alice"})
	assert.Error(t, err)
	_, err = m.AppendTurns(t.Context(), "x")
	assert.Error(t, err)
	_, err = m.Sweep(t.Context())
	assert.Error(t, err)
	_, err = m.Resume(t.Context(), "x", "alice")
	assert.Error(t, err)
	_, err = m.TakeClarification(t.Context(), "x")
	assert.Error(t, err)
	_, err = m.Active(t.Context(), "alice")
	assert.Error(t, err)
}

func TestSessionJSON(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	s := session.Session{
		ID: "id", UserID: "u", EmployeeID: "e", Status: session.StatusActive, ActiveAgent: "finance",
		TurnHistory:          []session.Turn{{Role: session.RoleUser, Content: "hi", Timestamp: at, IntentSummary: "greet"}, {Role: session.RoleAgent, Content: "yo", Timestamp: at}},
		WorkflowState:        map[string]any{"step": 1.0},
		PendingClarification: &session.Clarification{SuggestedAgent: "hr", OriginalInput: "x", Expires: at},
		Metadata:             map[string]any{"k": "v"},
		CreatedAt:            at, UpdatedAt: at, ExpiresAt: at,
	}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"session_id": "id", "user_id": "u", "employee_id": "e", "status": "active", "active_agent": "finance",
		"turn_history": [
			{"role": "user", "content": "hi", "timestamp": "2025-06-01T12:00:00Z", "intent_summary": "greet"},
			{"role": "agent", "content": "yo", "timestamp": "2025-06-01T12:00:00Z"}
		],
		"workflow_state": {"step": 1},
		"pending_clarification": {"suggested_agent": "hr", "original_input": "x", "expires": "2025-06-01T12:00:00Z"},
		"metadata": {"k": "v"},
		"created_at": "2025-06-01T12:00:00Z", "updated_at": "2025-06-01T12:00:00Z", "expires_at": "2025-06-01T12:00:00Z"
	}`, string(b))
	var back session.Session
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, s, back)

	// Through a pointer too.
	b2, err := json.Marshal(&s)
	require.NoError(t, err)
	assert.Equal(t, b, b2)
}

func TestCloneIsDeep(t *testing.T) {
	s := session.Session{
		TurnHistory:          []session.Turn{{Content: "a"}},
		WorkflowState:        map[string]any{"m": map[string]any{"l": []any{1.0, map[string]any{"x": 1.0}}}},
		Metadata:             map[string]any{"l": []any{"a"}},
		PendingClarification: &session.Clarification{SuggestedAgent: "hr"},
	}
	c := s.Clone()
	c.TurnHistory[0].Content = "b"
	c.WorkflowState["m"].(map[string]any)["l"].([]any)[1].(map[string]any)["x"] = 2.0
	c.Metadata["l"].([]any)[0] = "b"
	c.PendingClarification.SuggestedAgent = "it"
	assert.Equal(t, "a", s.TurnHistory[0].Content)
	assert.Equal(t, 1.0, s.WorkflowState["m"].(map[string]any)["l"].([]any)[1].(map[string]any)["x"])
	assert.Equal(t, "a", s.Metadata["l"].([]any)[0])
	assert.Equal(t, "hr", s.PendingClarification.SuggestedAgent)
	var zero session.Session
	assert.Equal(t, zero, zero.Clone(), "nil stays nil")
}

func TestStatusClosed(t *testing.T) {
	assert.False(t, session.StatusActive.Closed())
	assert.False(t, session.Status("").Closed())
	for _, st := range []session.Status{session.StatusCompleted, session.StatusAbandoned, session.StatusError} {
		assert.True(t, st.Closed(), st)
	}
}
