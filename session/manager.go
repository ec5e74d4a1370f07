package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/internal/jsonvalue"
	"github.com/agentmesh/agentmesh/principal"
)

// Defaults of [Options].
const (
	DefaultTTL              = 30 * time.Minute
	DefaultMaxTurns         = 100
	DefaultClarificationTTL = 5 * time.Minute
	DefaultRetention        = 24 * time.Hour
	DefaultSweepInterval    = time.Minute
)

// MaxUserIDLen is the longest user id (and employee id), in bytes, a
// [Manager] accepts.
const MaxUserIDLen = 512

// MetadataResumedFrom is the metadata key under which [Manager.Resume]
// records the id of the session a new one was resumed from.
const MetadataResumedFrom = "resumed_from"

// Options configures a [Manager]. A nil *Options means the zero value, and
// the zero value of every field is its documented default.
type Options struct {
	// TTL is how long an active session lives after its creation and after
	// each turn: every [Manager.AppendTurns] slides its expiry to now + TTL.
	// Zero or negative means [DefaultTTL] (30 min).
	TTL time.Duration

	// MaxTurns caps a session's history; appending beyond it drops the
	// oldest turns. Zero or negative means [DefaultMaxTurns] (100).
	MaxTurns int

	// ClarificationTTL is how long a pending clarification stays valid.
	// Zero or negative means [DefaultClarificationTTL] (5 min).
	ClarificationTTL time.Duration

	// Retention is how long a closed session stays readable (and
	// resumable) after it is closed, before the sweep deletes it. Zero or
	// negative means [DefaultRetention] (24 h).
	Retention time.Duration

	// SweepInterval is how often the Manager runs [Manager.Sweep] on a
	// goroutine it owns, until [Manager.Close]. Zero means
	// [DefaultSweepInterval] (1 min); a negative value starts no goroutine:
	// the host calls Sweep itself (or relies on a store that expires
	// records on its own).
	SweepInterval time.Duration

	// Now is the clock every expiry is computed against. Nil means
	// [time.Now].
	Now func() time.Time

	// OnClose, if set, is called once for every session that ends: closed,
	// resumed, replaced, or found expired by a write or the sweep — see
	// [CloseEvent] for each path, its status and the guarantee. It runs on
	// the goroutine of the Manager call that ended the session (the
	// sweeper's for the owned sweep), after the store write is durable,
	// outside any store transaction and with no lock held, so it may call
	// the Manager. It should return quickly: it delays that call's reply
	// (queue slow work, such as a webhook). Its ctx carries the values of
	// the call's context but not its cancellation. A panic in it is
	// recovered and logged at Error level. Nil means no hook.
	OnClose func(ctx context.Context, e CloseEvent)

	// Logger receives lifecycle events at Debug level (session created,
	// closed, resumed, swept), failures of the owned sweeper at Warn and
	// panics of OnClose at Error. Nil means discard. User ids and turn
	// contents are never logged.
	Logger *slog.Logger
}

// Params describes the session [Manager.GetOrCreate] creates when the user
// has no live active session.
type Params struct {
	// UserID identifies the user: the message's user_id, else its
	// employee_id (docs/API.md#how-a-message-is-routed).
	// Required; at most [MaxUserIDLen] bytes.
	UserID string
	// EmployeeID is recorded as given.
	EmployeeID string
	// ActiveAgent is the agent the conversation is routed to.
	ActiveAgent string
	// Metadata is copied into the new session.
	Metadata map[string]any
}

// Manager runs the session lifecycle (docs/API.md#sessions) over a [Store]:
// one active session per user, a sliding TTL, a capped history, serialised
// turns, clarifications, close, resume and the expiry sweep.
//
// A Manager is safe for concurrent use by multiple goroutines. It holds no
// session state of its own: every operation is one atomic store call (two
// for [Manager.Resume]), so several Managers, in one process or in several
// replicas sharing an etcd store, can work on the same sessions. Create it
// with [NewManager]; the zero Manager is inert: its methods return an
// error and Close returns nil.
type Manager struct {
	store     Store
	ttl       time.Duration
	maxTurns  int
	clarTTL   time.Duration
	retention time.Duration
	now       func() time.Time
	onClose   func(context.Context, CloseEvent)
	log       *slog.Logger

	stop      context.CancelFunc // stops the sweeper; nil without one
	done      chan struct{}      // closed when the sweeper has exited
	closeOnce sync.Once
}

// errNoStore is returned by the methods of a Manager not made by
// NewManager.
var errNoStore = errors.New("session: Manager not created with NewManager")

// NewManager returns a Manager over store. A nil opts means the defaults.
// Unless Options.SweepInterval is negative it starts the sweeper
// goroutine; call [Manager.Close] to stop it.
func NewManager(store Store, opts *Options) (*Manager, error) {
	if store == nil {
		return nil, errors.New("session: new manager: nil store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	m := &Manager{
		store:     store,
		ttl:       o.TTL,
		maxTurns:  o.MaxTurns,
		clarTTL:   o.ClarificationTTL,
		retention: o.Retention,
		now:       o.Now,
		onClose:   o.OnClose,
		log:       o.Logger,
	}
	if m.ttl <= 0 {
		m.ttl = DefaultTTL
	}
	if m.maxTurns <= 0 {
		m.maxTurns = DefaultMaxTurns
	}
	if m.clarTTL <= 0 {
		m.clarTTL = DefaultClarificationTTL
	}
	if m.retention <= 0 {
		m.retention = DefaultRetention
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.SweepInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		m.stop, m.done = cancel, make(chan struct{})
		go m.sweepLoop(ctx, o.SweepInterval)
	}
	return m, nil
}

// Close stops the sweeper goroutine, if there is one, and waits for it to
// exit (interrupting a sweep in progress). It does not close the store,
// which the caller owns; the Manager's other methods keep working. Close
// is idempotent, safe for concurrent use, and returns nil.
func (m *Manager) Close() error {
	if m == nil || m.stop == nil {
		return nil
	}
	m.closeOnce.Do(func() {
		m.stop()
		<-m.done
	})
	return nil
}

func (m *Manager) sweepLoop(ctx context.Context, every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := m.Sweep(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("session: sweep failed", "err", err)
		}
	}
}

// Sweep deletes every session whose expiry has passed (against the
// injected clock): active sessions idle for longer than the TTL, and
// closed sessions past their retention. Deleting an active session frees
// its user's slot and reports it to Options.OnClose as [StatusExpired],
// also when Sweep fails after deleting it. It returns how many sessions
// it deleted.
func (m *Manager) Sweep(ctx context.Context) (int, error) {
	if m == nil || m.store == nil {
		return 0, errNoStore
	}
	var visit func(Session) // nil: the store need not decode what it deletes
	if m.onClose != nil {
		visit = func(s Session) {
			if s.Status == StatusActive {
				m.closed(ctx, closeEventOf(&s, StatusExpired, s.ExpiresAt))
			}
		}
	}
	n, err := m.store.DeleteExpiredSessions(ctx, m.now(), visit)
	if err != nil {
		return n, fmt.Errorf("session: sweep: %w", err)
	}
	if n > 0 {
		m.log.Debug("session: swept expired sessions", "count", n)
	}
	return n, nil
}

// Get returns the session with the given id, whatever its status, or an
// error wrapping [ErrNotFound], or [ErrExpired] once its expiry has
// passed. A pending clarification that has lapsed is left out.
func (m *Manager) Get(ctx context.Context, id string) (Session, error) {
	if m == nil || m.store == nil {
		return Session{}, errNoStore
	}
	s, err := m.store.GetSession(ctx, id)
	if err == nil && !principal.Allowed(ctx, s.Principal) {
		err = ErrNotFound // another principal's: its existence is not revealed
	}
	if err != nil {
		return Session{}, fmt.Errorf("session: get %s: %w", id, err)
	}
	now := m.now()
	if s.ExpiredAt(now) {
		return Session{}, fmt.Errorf("session: get %s: %w", id, ErrExpired)
	}
	return m.view(s, now), nil
}

// Active returns the user's active session, or an error wrapping
// [ErrNotFound] when there is none — [ErrExpired] when there is one but it
// has expired (it counts as gone). It never writes: this is the lookup of
// the session bypass, where an identified user's next message goes
// straight to the session's agent (docs/API.md#how-a-message-is-routed).
func (m *Manager) Active(ctx context.Context, userID string) (Session, error) {
	if m == nil || m.store == nil {
		return Session{}, errNoStore
	}
	if err := checkUserID(userID); err != nil {
		return Session{}, fmt.Errorf("session: active: %w", err)
	}
	s, err := m.store.GetActiveSession(ctx, SlotKey(callerName(ctx), userID))
	if err != nil {
		return Session{}, fmt.Errorf("session: active: %w", err)
	}
	now := m.now()
	if s.ExpiredAt(now) {
		return Session{}, fmt.Errorf("session: active %s: %w", s.ID, ErrExpired)
	}
	return m.view(s, now), nil
}

// GetOrCreate returns the user's live active session (created false), or
// creates one from p (created true). An active session whose expiry has
// passed counts as gone: it is closed abandoned (and left for the sweep)
// in the same atomic store write that creates its successor, and reported
// to Options.OnClose as [StatusExpired].
//
// It is atomic per user: concurrent calls for one user, here or on
// another replica sharing the store, return the same session, and exactly
// one of them reports created.
func (m *Manager) GetOrCreate(ctx context.Context, p Params) (s Session, created bool, err error) {
	if m == nil || m.store == nil {
		return Session{}, false, errNoStore
	}
	if err := checkUserID(p.UserID); err != nil {
		return Session{}, false, fmt.Errorf("session: get or create: %w", err)
	}
	if len(p.EmployeeID) > MaxUserIDLen {
		return Session{}, false, fmt.Errorf("session: get or create: %w", apierr.Errorf(ErrInvalid, "employee id is %d bytes, more than %d", len(p.EmployeeID), MaxUserIDLen))
	}
	now := m.now()
	owner := callerName(ctx)
	slot := SlotKey(owner, p.UserID)
	// The common case, a live session, is a read: no write transaction.
	cur, err := m.store.GetActiveSession(ctx, slot)
	switch {
	case err == nil && !cur.ExpiredAt(now):
		return m.view(cur, now), false, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return Session{}, false, fmt.Errorf("session: get or create: %w", err)
	}
	fresh := Session{
		ID:            uuid.NewString(),
		UserID:        p.UserID,
		EmployeeID:    p.EmployeeID,
		Status:        StatusActive,
		ActiveAgent:   p.ActiveAgent,
		TurnHistory:   []Turn{},
		WorkflowState: map[string]any{},
		Metadata:      jsonvalue.CloneMap(p.Metadata),
		CreatedAt:     now,
		UpdatedAt:     now,
		ExpiresAt:     now.Add(m.ttl),
		Principal:     owner,
	}
	var gone *CloseEvent // the expired session replaced, of fn's last call
	err = m.store.UpdateActiveSession(ctx, slot, func(cur *Session) (*Session, *Session, error) {
		gone = nil
		if cur != nil && !cur.ExpiredAt(now) {
			s, created = cur.Clone(), false
			return nil, nil, nil
		}
		var upd *Session
		if cur != nil {
			upd = expire(cur, now)
			e := closeEventOf(upd, StatusExpired, upd.ExpiresAt)
			gone = &e
		}
		next := fresh.Clone()
		s, created = fresh.Clone(), true
		return upd, &next, nil
	})
	if err != nil {
		return Session{}, false, fmt.Errorf("session: get or create: %w", err)
	}
	if gone != nil {
		m.closed(ctx, *gone)
	}
	if created {
		m.log.Debug("session: created", "session_id", s.ID)
	}
	return m.view(s, now), created, nil
}

// AppendTurns appends turns to the history of the active session id, in
// order, dropping the oldest beyond Options.MaxTurns, and slides its
// expiry to now + TTL. A turn with a zero Timestamp gets the current time;
// a role other than user or agent is [ErrInvalid]. With no turns it only
// slides the expiry.
//
// Appends to one session are serialised by the store: concurrent calls
// all land, none lost, each call's turns contiguous. A closed session
// gives [ErrNotActive], an expired one [ErrExpired].
func (m *Manager) AppendTurns(ctx context.Context, id string, turns ...Turn) (Session, error) {
	for i := range turns {
		if turns[i].Role != RoleUser && turns[i].Role != RoleAgent {
			return Session{}, fmt.Errorf("session: append turns to %s: %w", id, apierr.Errorf(ErrInvalid, "role %q is not %q or %q", turns[i].Role, RoleUser, RoleAgent))
		}
	}
	return m.update(ctx, "append turns to", id, func(s *Session, now time.Time) error {
		for _, t := range turns {
			if t.Timestamp.IsZero() {
				t.Timestamp = now
			}
			s.TurnHistory = append(s.TurnHistory, t)
		}
		s.TurnHistory = m.capTurns(s.TurnHistory)
		s.ExpiresAt = now.Add(m.ttl)
		return nil
	})
}

// SetWorkflowState replaces the workflow state of the active session id
// with a copy of state (nil means empty).
func (m *Manager) SetWorkflowState(ctx context.Context, id string, state map[string]any) (Session, error) {
	return m.update(ctx, "set workflow state of", id, func(s *Session, _ time.Time) error {
		s.WorkflowState = jsonvalue.CloneMap(state)
		if s.WorkflowState == nil {
			s.WorkflowState = map[string]any{}
		}
		return nil
	})
}

// SetActiveAgent records agent as the active session's agent.
func (m *Manager) SetActiveAgent(ctx context.Context, id, agent string) (Session, error) {
	return m.update(ctx, "set active agent of", id, func(s *Session, _ time.Time) error {
		s.ActiveAgent = agent
		return nil
	})
}

// Update applies fn to a copy of the active session id and stores the
// result, atomically. fn may change EmployeeID, ActiveAgent, TurnHistory
// (capped at MaxTurns after fn), WorkflowState, PendingClarification and
// Metadata; changes to the other fields are discarded (use
// [Manager.AppendTurns] to add turns with the sliding expiry, and
// [Manager.CloseSession] to close). If fn returns an error, nothing is
// written and Update returns it, wrapped. fn may be called more than once
// and must not call the Manager or the store.
func (m *Manager) Update(ctx context.Context, id string, fn func(s *Session) error) (Session, error) {
	return m.update(ctx, "update", id, func(s *Session, _ time.Time) error {
		keep := *s
		if err := fn(s); err != nil {
			return err
		}
		s.ID, s.UserID, s.Status, s.Principal = keep.ID, keep.UserID, keep.Status, keep.Principal
		s.CreatedAt, s.UpdatedAt, s.ExpiresAt = keep.CreatedAt, keep.UpdatedAt, keep.ExpiresAt
		s.TurnHistory = m.capTurns(s.TurnHistory)
		return nil
	})
}

// SetClarification stores a pending clarification on the active session id
// (docs/API.md#clarification), replacing any other: the user was asked
// about suggestedAgent after sending originalInput. It lapses
// Options.ClarificationTTL (5 min) from now.
func (m *Manager) SetClarification(ctx context.Context, id, suggestedAgent, originalInput string) (Session, error) {
	return m.update(ctx, "set clarification of", id, func(s *Session, now time.Time) error {
		s.PendingClarification = &Clarification{
			SuggestedAgent: suggestedAgent,
			OriginalInput:  originalInput,
			Expires:        now.Add(m.clarTTL),
		}
		return nil
	})
}

// TakeClarification removes the pending clarification of the active
// session id and returns it: nil when there is none or it has lapsed. It
// is atomic, so of two concurrent messages only one resolves the
// clarification.
func (m *Manager) TakeClarification(ctx context.Context, id string) (*Clarification, error) {
	if m == nil || m.store == nil {
		return nil, errNoStore
	}
	now := m.now()
	var out *Clarification
	err := m.store.UpdateSession(ctx, id, func(cur *Session) (*Session, error) {
		out = nil
		if err := live(cur, now); err != nil {
			return nil, err
		}
		if cur.PendingClarification == nil {
			return nil, nil // nothing to take, nothing to write
		}
		next := cur.Clone()
		if c := next.PendingClarification; c.Expires.After(now) {
			out = c
		}
		next.PendingClarification = nil
		next.UpdatedAt = now
		return &next, nil
	})
	if err != nil {
		return nil, fmt.Errorf("session: take clarification of %s: %w", id, err)
	}
	if out != nil {
		c := *out
		out = &c
	}
	return out, nil
}

// CloseSession closes the active session id with status — completed,
// abandoned or error ([ErrInvalid] otherwise) — frees its user's slot in
// the same write, drops any pending clarification, and keeps the record
// readable for Options.Retention, and reports it to Options.OnClose. A
// session already closed gives [ErrNotActive] and is left as it is.
func (m *Manager) CloseSession(ctx context.Context, id string, status Status) (Session, error) {
	if !status.Closed() {
		return Session{}, fmt.Errorf("session: close %s: %w", id, apierr.Errorf(ErrInvalid, "status %q is not completed, abandoned or error", status))
	}
	s, err := m.update(ctx, "close", id, func(s *Session, now time.Time) error {
		m.closeAs(s, status, now)
		return nil
	})
	if err == nil {
		m.closed(ctx, closeEventOf(&s, status, s.UpdatedAt))
	}
	return s, err
}

// Resume continues the conversation of session id in a new active session
// for userID (POST /v1/sessions/{id}/resume): the new session carries the
// prior's agent, employee id, last MaxTurns turns, workflow state and
// metadata (plus [MetadataResumedFrom]), and the prior is closed
// completed — also when it was already closed (docs/API.md#sessions).
//
// The prior must belong to userID ([ErrForbidden]) and must not have
// expired ([ErrExpired]). If the user has another active session, it is
// closed abandoned in the same atomic write that makes the new one active
// (one whose expiry has passed counts as expired). Options.OnClose hears
// of each session this closes: the prior, if it was active, as completed;
// the other as abandoned or [StatusExpired].
//
// Resume is two store writes: the first closes the prior and freezes its
// history, the second creates the new session. If the second fails, the
// prior stays completed and can be resumed again.
func (m *Manager) Resume(ctx context.Context, id, userID string) (Session, error) {
	if m == nil || m.store == nil {
		return Session{}, errNoStore
	}
	if err := checkUserID(userID); err != nil {
		return Session{}, fmt.Errorf("session: resume %s: %w", id, err)
	}
	now := m.now()
	var prior Session
	var wasActive bool
	err := m.store.UpdateSession(ctx, id, func(cur *Session) (*Session, error) {
		if cur.UserID != userID || !principal.Allowed(ctx, cur.Principal) {
			return nil, ErrForbidden
		}
		if cur.ExpiredAt(now) {
			return nil, ErrExpired
		}
		wasActive = cur.Status == StatusActive
		next := cur.Clone()
		m.closeAs(&next, StatusCompleted, now)
		next.UpdatedAt = now
		prior = next.Clone()
		return &next, nil
	})
	if err != nil {
		return Session{}, fmt.Errorf("session: resume %s: %w", id, err)
	}
	if wasActive {
		m.closed(ctx, closeEventOf(&prior, StatusCompleted, now))
	}
	meta := jsonvalue.CloneMap(prior.Metadata)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[MetadataResumedFrom] = prior.ID
	state := prior.WorkflowState
	if state == nil {
		state = map[string]any{}
	}
	fresh := Session{
		ID:            uuid.NewString(),
		UserID:        prior.UserID,
		EmployeeID:    prior.EmployeeID,
		Status:        StatusActive,
		ActiveAgent:   prior.ActiveAgent,
		TurnHistory:   m.capTurns(prior.TurnHistory),
		WorkflowState: state,
		Metadata:      meta,
		CreatedAt:     now,
		UpdatedAt:     now,
		ExpiresAt:     now.Add(m.ttl),
		Principal:     prior.Principal,
	}
	if fresh.TurnHistory == nil {
		fresh.TurnHistory = []Turn{}
	}
	var other *CloseEvent // the user's other active session closed, of fn's last call
	err = m.store.UpdateActiveSession(ctx, fresh.Slot(), func(cur *Session) (*Session, *Session, error) {
		var upd *Session
		other = nil
		switch {
		case cur == nil:
		case cur.ExpiredAt(now):
			upd = expire(cur, now)
			e := closeEventOf(upd, StatusExpired, upd.ExpiresAt)
			other = &e
		default:
			c := cur.Clone()
			m.closeAs(&c, StatusAbandoned, now)
			c.UpdatedAt = now
			upd = &c
			e := closeEventOf(upd, StatusAbandoned, now)
			other = &e
		}
		next := fresh.Clone()
		return upd, &next, nil
	})
	if err != nil {
		return Session{}, fmt.Errorf("session: resume %s: %w", id, err)
	}
	if other != nil {
		m.closed(ctx, *other)
	}
	m.log.Debug("session: resumed", "session_id", fresh.ID, "from", prior.ID)
	return m.view(fresh, now), nil
}

// update applies mutate to a copy of the live active session id, sets its
// UpdatedAt and stores it, atomically; it returns what was stored.
func (m *Manager) update(ctx context.Context, op, id string, mutate func(s *Session, now time.Time) error) (Session, error) {
	if m == nil || m.store == nil {
		return Session{}, errNoStore
	}
	now := m.now()
	var out Session
	err := m.store.UpdateSession(ctx, id, func(cur *Session) (*Session, error) {
		if !principal.Allowed(ctx, cur.Principal) {
			return nil, ErrNotFound
		}
		if err := live(cur, now); err != nil {
			return nil, err
		}
		next := cur.Clone()
		if err := mutate(&next, now); err != nil {
			return nil, err
		}
		next.UpdatedAt = now
		out = next.Clone()
		return &next, nil
	})
	if err != nil {
		return Session{}, fmt.Errorf("session: %s %s: %w", op, id, err)
	}
	return m.view(out, now), nil
}

// live reports why s, read at now, cannot take a change: it expired, or it
// is closed.
func live(s *Session, now time.Time) error {
	switch {
	case s.ExpiredAt(now):
		return ErrExpired
	case s.Status != StatusActive:
		return apierr.Errorf(ErrNotActive, "it is %s", s.Status)
	}
	return nil
}

// closeAs closes s with status at now, keeping it for the retention.
func (m *Manager) closeAs(s *Session, status Status, now time.Time) {
	s.Status = status
	s.PendingClarification = nil
	s.ExpiresAt = now.Add(m.retention)
}

// expire returns a copy of cur, an active session whose expiry has passed,
// closed abandoned. Its expiry stays in the past: it is gone, and the
// sweep deletes it.
func expire(cur *Session, now time.Time) *Session {
	c := cur.Clone()
	c.Status = StatusAbandoned
	c.PendingClarification = nil
	c.UpdatedAt = now
	return &c
}

// capTurns returns the last MaxTurns turns of h, in a new array when it
// drops any.
func (m *Manager) capTurns(h []Turn) []Turn {
	if len(h) <= m.maxTurns {
		return h
	}
	return slices.Clone(h[len(h)-m.maxTurns:])
}

// view is s as the Manager shows it at now: a lapsed clarification left
// out.
func (m *Manager) view(s Session, now time.Time) Session {
	if c := s.PendingClarification; c != nil && !c.Expires.After(now) {
		s.PendingClarification = nil
	}
	return s
}

func checkUserID(id string) error {
	switch {
	case id == "":
		return apierr.Errorf(ErrInvalid, "empty user id")
	case len(id) > MaxUserIDLen:
		return apierr.Errorf(ErrInvalid, "user id is %d bytes, more than %d", len(id), MaxUserIDLen)
	case strings.IndexByte(id, 0) >= 0:
		return apierr.Errorf(ErrInvalid, "user id has a NUL byte")
	}
	return nil
}

// callerName returns the principal ctx carries, as a session records it:
// "" for a caller without one.
func callerName(ctx context.Context) string {
	if p, ok := principal.FromContext(ctx); ok {
		return principal.Of(p.Name)
	}
	return ""
}
