package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/logtest"
	"github.com/agentmesh/agentmesh/session"
)

// closes records the events of Options.OnClose.
type closes struct {
	mu     sync.Mutex
	events []session.CloseEvent
}

func (c *closes) hook(_ context.Context, e session.CloseEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

// take returns the events recorded since the last take.
func (c *closes) take() []session.CloseEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.events
	c.events = nil
	return out
}

// newObservedManager returns a Manager over a store of kind (a key of
// stores) with clk as its clock, no sweeper, and its close events
// recorded.
func newObservedManager(t *testing.T, kind string, clk *clock, opts *session.Options) (*session.Manager, session.Store, *closes) {
	t.Helper()
	store := stores[kind](t)
	var o session.Options
	if opts != nil {
		o = *opts
	}
	rec := &closes{}
	o.Now, o.OnClose, o.SweepInterval = clk.Now, rec.hook, -1
	m, err := session.NewManager(store, &o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m, store, rec
}

// forEachStore runs test as a subtest per store of stores.
func forEachStore(t *testing.T, test func(t *testing.T, kind string)) {
	for kind := range stores {
		t.Run(kind, func(t *testing.T) { test(t, kind) })
	}
}

func TestOnCloseCloseSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		for _, status := range []session.Status{session.StatusCompleted, session.StatusAbandoned, session.StatusError} {
			t.Run(string(status), func(t *testing.T) {
				clk := newClock()
				m, _, rec := newObservedManager(t, kind, clk, nil)
				s, _, err := m.GetOrCreate(t.Context(), session.Params{UserID: "alice", EmployeeID: "E-7", ActiveAgent: "finance"})
				require.NoError(t, err)
				clk.Advance(time.Second)
				_, err = m.AppendTurns(t.Context(), s.ID, userTurn("1"), session.Turn{Role: session.RoleAgent, Content: "2"}, userTurn("3"))
				require.NoError(t, err)
				_, err = m.SetActiveAgent(t.Context(), s.ID, "hr")
				require.NoError(t, err)
				assert.Empty(t, rec.take(), "no event before the close")

				clk.Advance(90 * time.Second)
				closedAt := clk.Now()
				_, err = m.CloseSession(t.Context(), s.ID, status)
				require.NoError(t, err)
				assert.Equal(t, []session.CloseEvent{{
					SessionID:   s.ID,
					UserID:      "alice",
					EmployeeID:  "E-7",
					ActiveAgent: "hr",
					Status:      status,
					Turns:       3,
					CreatedAt:   s.CreatedAt,
					ClosedAt:    closedAt,
				}}, normalizeEvents(rec.take()))
				_, err = m.CloseSession(t.Context(), s.ID, session.StatusCompleted)
				assert.ErrorIs(t, err, session.ErrNotActive)
				_, err = m.CloseSession(t.Context(), s.ID, session.StatusActive)
				assert.ErrorIs(t, err, session.ErrInvalid)
				_, err = m.CloseSession(t.Context(), "missing", session.StatusCompleted)
				assert.ErrorIs(t, err, session.ErrNotFound)
				assert.Empty(t, rec.take(), "a refused close reports nothing")
			})
		}
	})
}

// normalizeEvents drops the monotonic clock readings and zones of the
// events' times, as a store round trip does.
func normalizeEvents(es []session.CloseEvent) []session.CloseEvent {
	for i := range es {
		es[i].CreatedAt, es[i].ClosedAt = es[i].CreatedAt.UTC().Round(0), es[i].ClosedAt.UTC().Round(0)
	}
	return es
}

func TestCloseEventDuration(t *testing.T) {
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	e := session.CloseEvent{CreatedAt: created, ClosedAt: created.Add(90 * time.Second)}
	assert.Equal(t, 90*time.Second, e.Duration())
}

func TestOnCloseResume(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		clk := newClock()
		m, _, rec := newObservedManager(t, kind, clk, &session.Options{TTL: time.Minute})
		prior := start(t, m, "alice")
		_, err := m.AppendTurns(t.Context(), prior.ID, userTurn("1"), userTurn("2"))
		require.NoError(t, err)
		clk.Advance(10 * time.Second)

		// Resuming the active session closes it completed.
		r, err := m.Resume(t.Context(), prior.ID, "alice")
		require.NoError(t, err)
		assert.Equal(t, []session.CloseEvent{{
			SessionID: prior.ID, UserID: "alice", ActiveAgent: "finance", Status: session.StatusCompleted,
			Turns: 2, CreatedAt: prior.CreatedAt, ClosedAt: clk.Now(),
		}}, normalizeEvents(rec.take()))

		// Resuming a closed session: the prior was reported when it
		// closed; the user's other active session is abandoned.
		clk.Advance(10 * time.Second)
		_, err = m.AppendTurns(t.Context(), r.ID, userTurn("3"))
		require.NoError(t, err)
		r2, err := m.Resume(t.Context(), prior.ID, "alice")
		require.NoError(t, err)
		assert.Equal(t, []session.CloseEvent{{
			SessionID: r.ID, UserID: "alice", ActiveAgent: "finance", Status: session.StatusAbandoned,
			Turns: 3, CreatedAt: r.CreatedAt, ClosedAt: clk.Now(),
		}}, normalizeEvents(rec.take()))

		// The other active session has expired: it is reported expired,
		// closed when its TTL passed.
		clk.Advance(2 * time.Minute)
		_, err = m.Resume(t.Context(), prior.ID, "alice")
		require.NoError(t, err)
		assert.Equal(t, []session.CloseEvent{{
			SessionID: r2.ID, UserID: "alice", ActiveAgent: "finance", Status: session.StatusExpired,
			Turns: 2, CreatedAt: r2.CreatedAt, ClosedAt: r2.ExpiresAt,
		}}, normalizeEvents(rec.take()))

		// A refused resume reports nothing.
		_, err = m.Resume(t.Context(), prior.ID, "mallory")
		assert.ErrorIs(t, err, session.ErrForbidden)
		assert.Empty(t, rec.take())
	})
}

func TestOnCloseGetOrCreateReplacesExpired(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		clk := newClock()
		m, store, rec := newObservedManager(t, kind, clk, &session.Options{TTL: time.Minute})
		s := start(t, m, "alice")
		_, err := m.AppendTurns(t.Context(), s.ID, userTurn("1"))
		require.NoError(t, err)
		expires := clk.Now().Add(time.Minute)
		clk.Advance(time.Minute)
		_, _, err = m.GetOrCreate(t.Context(), session.Params{UserID: "alice"})
		require.NoError(t, err)
		got := normalizeEvents(rec.take())
		assert.Equal(t, []session.CloseEvent{{
			SessionID: s.ID, UserID: "alice", ActiveAgent: "finance", Status: session.StatusExpired,
			Turns: 1, CreatedAt: s.CreatedAt, ClosedAt: expires.UTC(),
		}}, got)
		if len(got) == 1 {
			assert.Equal(t, time.Minute, got[0].Duration())
		}

		// The replaced session is stored abandoned; the sweep that deletes
		// it reports nothing more.
		stored, err := store.GetSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, session.StatusAbandoned, stored.Status)
		n, err := m.Sweep(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Empty(t, rec.take(), "a closed session swept is not reported again")
	})
}

func TestOnCloseSweep(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		clk := newClock()
		m, _, rec := newObservedManager(t, kind, clk, &session.Options{TTL: time.Minute, Retention: time.Hour})
		a, _, err := m.GetOrCreate(t.Context(), session.Params{UserID: "a", EmployeeID: "E-a", ActiveAgent: "finance"})
		require.NoError(t, err)
		_, err = m.AppendTurns(t.Context(), a.ID, userTurn("1"), userTurn("2"))
		require.NoError(t, err)
		b := start(t, m, "b")
		_, err = m.CloseSession(t.Context(), b.ID, session.StatusCompleted)
		require.NoError(t, err)
		rec.take()
		clk.Advance(30 * time.Second)
		c := start(t, m, "c")

		clk.Advance(30 * time.Second) // a expired, c has 30 s left
		n, err := m.Sweep(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Equal(t, []session.CloseEvent{{
			SessionID: a.ID, UserID: "a", EmployeeID: "E-a", ActiveAgent: "finance", Status: session.StatusExpired,
			Turns: 2, CreatedAt: a.CreatedAt, ClosedAt: clk.Now(),
		}}, normalizeEvents(rec.take()))

		clk.Advance(time.Hour) // c expired, b past its retention
		n, err = m.Sweep(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		got := rec.take()
		require.Len(t, got, 1, "only the active c: b was reported when it closed")
		assert.Equal(t, c.ID, got[0].SessionID)
		assert.Equal(t, session.StatusExpired, got[0].Status)
	})
}

// TestOnCloseAfterTheWrite: the hook sees the write it reports, and may
// call the Manager (it runs outside the store's transaction).
func TestOnCloseAfterTheWrite(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		clk := newClock()
		type seen struct {
			e     session.CloseEvent
			state string
		}
		var (
			mu  sync.Mutex
			got []seen
			m   *session.Manager
		)
		store := stores[kind](t)
		m, err := session.NewManager(store, &session.Options{
			Now: clk.Now, TTL: time.Minute, SweepInterval: -1,
			OnClose: func(ctx context.Context, e session.CloseEvent) {
				state := "gone"
				if s, err := store.GetSession(ctx, e.SessionID); err == nil {
					state = string(s.Status)
				}
				// A write from the hook, through the Manager.
				_, _, err := m.GetOrCreate(ctx, session.Params{UserID: "from-hook-" + e.SessionID})
				if err != nil {
					state = "write failed: " + err.Error()
				}
				mu.Lock()
				got = append(got, seen{e, state})
				mu.Unlock()
			},
		})
		require.NoError(t, err)
		defer m.Close()
		a := start(t, m, "a")
		_, err = m.CloseSession(t.Context(), a.ID, session.StatusCompleted)
		require.NoError(t, err)
		b := start(t, m, "b")
		clk.Advance(time.Minute)
		_, err = m.Sweep(t.Context())
		require.NoError(t, err)

		mu.Lock()
		defer mu.Unlock()
		var states []string
		for _, s := range got {
			if s.e.SessionID == a.ID || s.e.SessionID == b.ID {
				states = append(states, s.e.SessionID+" "+s.state)
			}
		}
		assert.Equal(t, []string{a.ID + " completed", b.ID + " gone"}, states,
			"the hook runs once the close is stored and the sweep's delete committed")
	})
}

func TestOnCloseContextAndPanic(t *testing.T) {
	clk := newClock()
	var buf logtest.Buffer
	type key struct{}
	var ctxErr error
	var value any
	m, err := session.NewManager(stores["memstore"](t), &session.Options{
		Now: clk.Now, SweepInterval: -1,
		Logger: slog.New(slog.NewTextHandler(&buf, nil)),
		OnClose: func(ctx context.Context, e session.CloseEvent) {
			value, ctxErr = ctx.Value(key{}), ctx.Err()
			panic("hook bug")
		},
	})
	require.NoError(t, err)
	s := start(t, m, "alice")
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
	defer cancel()
	closed, err := m.CloseSession(ctx, s.ID, session.StatusCompleted)
	require.NoError(t, err, "the close happened: a panicking hook does not fail it")
	assert.Equal(t, session.StatusCompleted, closed.Status)
	assert.Equal(t, "v", value, "the hook's ctx carries the call's values")
	assert.NoError(t, ctxErr)
	assert.Contains(t, buf.String(), "OnClose panicked")
	assert.Contains(t, buf.String(), "hook bug")
	assert.NotContains(t, buf.String(), "alice", "user ids are not logged")
}

// TestOnCloseAtMostOnce: closes, replacements of expired sessions,
// resumes and sweeps race over the same sessions, on two Managers sharing
// the store (as replicas do); every session that ended is reported
// exactly once between them.
func TestOnCloseAtMostOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		clk := newClock()
		store := stores[kind](t)
		rec := &closes{}
		var ms []*session.Manager
		for range 2 {
			m, err := session.NewManager(store, &session.Options{Now: clk.Now, TTL: time.Minute, SweepInterval: -1, OnClose: rec.hook})
			require.NoError(t, err)
			defer m.Close()
			ms = append(ms, m)
		}
		const users = 8
		var ids sync.Map // every session id made
		for u := range users {
			s := start(t, ms[0], fmt.Sprintf("user-%d", u))
			ids.Store(s.ID, true)
		}
		var wg sync.WaitGroup
		for round := range 30 {
			for u := range users {
				user := fmt.Sprintf("user-%d", u)
				m := ms[(u+round)%2]
				wg.Go(func() {
					s, _, err := m.GetOrCreate(t.Context(), session.Params{UserID: user})
					if !assert.NoError(t, err) {
						return
					}
					ids.Store(s.ID, true)
					switch round % 3 {
					case 0:
						_, err = m.CloseSession(t.Context(), s.ID, session.StatusCompleted)
					case 1:
						var r session.Session
						if r, err = m.Resume(t.Context(), s.ID, user); err == nil {
							ids.Store(r.ID, true)
						}
					}
					if err != nil && !errors.Is(err, session.ErrNotActive) && !errors.Is(err, session.ErrNotFound) {
						assert.NoError(t, err)
					}
				})
				wg.Go(func() {
					_, err := ms[round%2].Sweep(t.Context())
					assert.NoError(t, err)
				})
			}
			clk.Advance(20 * time.Second) // some sessions expire
		}
		wg.Wait()
		clk.Advance(time.Hour)
		for _, m := range ms {
			_, err := m.Sweep(t.Context())
			require.NoError(t, err)
		}
		count := map[string]int{}
		for _, e := range rec.take() {
			count[e.SessionID]++
		}
		made := 0
		ids.Range(func(k, _ any) bool {
			made++
			id := k.(string)
			assert.Equal(t, 1, count[id], "session %s reported %d times", id, count[id])
			return true
		})
		assert.Len(t, count, made, "only the sessions made are reported")
	})
}

func TestCloseEventJSON(t *testing.T) {
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	e := session.CloseEvent{
		SessionID: "s1", UserID: "u1", EmployeeID: "E1", ActiveAgent: "finance", Status: session.StatusExpired,
		Turns: 4, CreatedAt: created, ClosedAt: created.Add(time.Minute),
	}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.JSONEq(t, `{"session_id":"s1","user_id":"u1","employee_id":"E1","active_agent":"finance","status":"expired",
		"turns":4,"created_at":"2025-06-01T12:00:00Z","closed_at":"2025-06-01T12:01:00Z"}`, string(b))
	assert.False(t, session.StatusExpired.Closed(), "expired is no status a session can be closed with")
}
