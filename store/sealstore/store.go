package sealstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentmesh/agentmesh/registry"
)

// Options configures [Wrap]. A nil *Options means the zero value, and the
// zero value of every field is its documented default.
type Options struct {
	// Logger receives the records a watch leaves out because they do not
	// open (at Error level, naming the agent and the key id). Nil means
	// discard.
	Logger *slog.Logger
}

// Wrap returns inner as a [registry.Store] whose agent credentials
// (Auth.Token) are sealed with ring in inner and in clear for the
// caller: UpdateAgent seals what its function returns and opens what it
// passes it, GetAgent and ListAgents open what they return. When inner
// is a [registry.WatchableStore], so is the result, and the changes
// WatchAgents reports are opened too. The result has no Close: inner
// stays the caller's.
//
// A record in clear (written before a key was configured) is read as it
// is. A sealed record whose key is not in ring fails the read or the
// update with an error wrapping [ErrUnknownKey]; a watch leaves such a
// record out of its report (logged), as if this process could not see
// it. A nil ring stores credentials in clear, still opens nothing, and
// refuses a credential that would read back as sealed (one starting with
// [Prefix]) with an error wrapping [registry.ErrInvalid].
//
// A record whose credential is unchanged by an update keeps its sealed
// value when it is sealed with the ring's first key: only new, changed
// and re-keyed credentials are sealed anew ([Rekey]).
func Wrap(inner registry.Store, ring *Keyring, opts *Options) registry.Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{inner: inner, ring: ring, log: o.Logger}
	if ws, ok := inner.(registry.WatchableStore); ok {
		return &WatchableStore{Store: s, inner: ws}
	}
	return s
}

// Store is the [registry.Store] [Wrap] returns over a store that is not
// watchable. It is safe for concurrent use when its inner store is.
type Store struct {
	inner registry.Store
	ring  *Keyring
	log   *slog.Logger
}

// WatchableStore is the [registry.WatchableStore] [Wrap] returns over a
// watchable store.
type WatchableStore struct {
	*Store
	inner registry.WatchableStore
}

var (
	_ registry.Store          = (*Store)(nil)
	_ registry.WatchableStore = (*WatchableStore)(nil)
)

// GetAgent returns the agent stored under name with its credential
// opened.
func (s *Store) GetAgent(ctx context.Context, name string) (registry.Agent, error) {
	a, err := s.inner.GetAgent(ctx, name)
	if err != nil {
		return a, err
	}
	a, _, err = s.open(name, a)
	return a, err
}

// ListAgents returns every stored agent with its credential opened. One
// credential that does not open fails the whole list.
func (s *Store) ListAgents(ctx context.Context) ([]registry.Agent, error) {
	list, err := s.inner.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range list {
		if list[i], _, err = s.open(list[i].Name, list[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return list, nil
}

// UpdateAgent is the inner store's UpdateAgent with fn's cur opened and
// its result sealed. A stored credential that does not open fails it
// with nothing written.
func (s *Store) UpdateAgent(ctx context.Context, name string, fn func(cur *registry.Agent) (*registry.Agent, error)) error {
	return s.inner.UpdateAgent(ctx, name, s.sealing(name, fn))
}

// UpdateAgentRevision is the inner store's UpdateAgentRevision with fn's
// cur opened and its result sealed.
func (w *WatchableStore) UpdateAgentRevision(ctx context.Context, name string, fn func(cur *registry.Agent) (*registry.Agent, error)) (int64, error) {
	return w.inner.UpdateAgentRevision(ctx, name, w.sealing(name, fn))
}

// WatchAgents is the inner store's WatchAgents with every change's
// credential opened. A change whose credential does not open is left out
// and logged: in a snapshot, the agent is then missing, as if deleted.
func (w *WatchableStore) WatchAgents(ctx context.Context, fn func(registry.AgentChanges)) error {
	return w.inner.WatchAgents(ctx, func(b registry.AgentChanges) {
		changes := make([]registry.AgentChange, 0, len(b.Changes))
		for _, ch := range b.Changes {
			if ch.Agent != nil {
				a, _, err := w.open(ch.Name, *ch.Agent)
				if err != nil {
					w.log.Error("sealstore: agent record left out: its credential does not open", "agent", ch.Name, "err", err)
					continue
				}
				ch.Agent = &a
			}
			changes = append(changes, ch)
		}
		b.Changes = changes
		fn(b)
	})
}

// stored is what an update read: the sealed value of its credential and
// what it opened to.
type stored struct {
	value, token string
}

// sealing wraps fn: cur is opened before fn sees it, and what fn returns
// is sealed before the inner store writes it.
func (s *Store) sealing(name string, fn func(cur *registry.Agent) (*registry.Agent, error)) func(cur *registry.Agent) (*registry.Agent, error) {
	return func(cur *registry.Agent) (*registry.Agent, error) {
		var was stored
		if cur != nil {
			a, st, err := s.open(name, *cur)
			if err != nil {
				return nil, err
			}
			cur, was = &a, st
		}
		next, err := fn(cur)
		if err != nil || next == nil {
			return next, err
		}
		return s.seal(name, next, was)
	}
}

// open returns a with its credential opened (a copy with an Auth of its
// own when it was sealed), and what was stored.
func (s *Store) open(name string, a registry.Agent) (registry.Agent, stored, error) {
	if a.Auth == nil || !IsSealed(a.Auth.Token) {
		return a, stored{}, nil
	}
	token, err := s.ring.Open(name, a.Auth.Token)
	if err != nil {
		return registry.Agent{}, stored{}, err
	}
	st := stored{value: a.Auth.Token, token: token}
	auth := *a.Auth
	auth.Token = token
	a.Auth = &auth
	return a, st, nil
}

// seal returns next as stored: a copy with its credential sealed (the
// stored value kept when the credential did not change and its key still
// seals), or next itself when there is nothing to seal.
func (s *Store) seal(name string, next *registry.Agent, was stored) (*registry.Agent, error) {
	if next.Auth == nil || next.Auth.Token == "" {
		return next, nil
	}
	token := next.Auth.Token
	if s.ring.KeyID() == "" {
		if IsSealed(token) {
			return nil, fmt.Errorf("%w: auth.token: a credential stored in clear text may not begin with %q (configure a secret key to seal it)", registry.ErrInvalid, Prefix)
		}
		return next, nil
	}
	value := was.value
	if id, _ := SealedKeyID(value); id != s.ring.KeyID() || was.token != token {
		var err error
		if value, err = s.ring.Seal(name, token); err != nil {
			return nil, err
		}
	}
	out := *next
	auth := *next.Auth
	auth.Token = value
	out.Auth = &auth
	return &out, nil
}
