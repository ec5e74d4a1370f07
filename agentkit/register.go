package agentkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/registry"
)

// Registration keeps an agent registered with a mesh: it heartbeats
// every third of the agent's TTL (so that one missed heartbeat does not
// make the agent stale), registers the agent again when the mesh no
// longer knows it (it was removed after going stale, or the mesh lost
// its state), and unregisters it on [Registration.Close].
//
// Every call to the mesh uses the one [client.Client] given to
// [Agent.Register], and so one token: the principal that registered the
// agent owns it, and only it (or an admin) may heartbeat or delete it.
//
// A Registration is safe for concurrent use.
type Registration struct {
	mesh   *client.Client
	rec    registry.Agent // as sent
	log    *slog.Logger
	cancel context.CancelFunc // stops the heartbeats
	done   chan struct{}      // closed when the heartbeats stopped

	mu     sync.Mutex
	stored registry.Agent // the record as the mesh last returned it

	closeOnce sync.Once
	closeErr  error
}

// Register registers rec with mesh (POST /v1/agents, which replaces an
// agent of the same name that the token's principal owns) and, when
// rec.TTLSeconds is set, keeps it alive with heartbeats until
// [Registration.Close]. rec.Endpoint must be the URL at which the mesh
// reaches a's [Agent.ServeHTTP]. When the agent has a token
// (Options.Token), rec.Auth is set to it as a bearer token; a rec.Auth
// with another credential is an error, since the agent would refuse
// what the mesh sends. The mesh's refusal is returned as the
// *[client.Error] it is, wrapped.
func (a *Agent) Register(ctx context.Context, mesh *client.Client, rec registry.Agent) (*Registration, error) {
	if a == nil || a.h == nil {
		return nil, errors.New("agentkit: Register: agent not initialised: use agentkit.New")
	}
	if mesh == nil {
		return nil, errors.New("agentkit: Register: nil mesh client")
	}
	rec = rec.Clone()
	if a.token != "" {
		switch {
		case rec.Auth == nil:
			rec.Auth = &registry.Auth{Type: registry.AuthBearer, Token: a.token}
		case rec.Auth.Type != registry.AuthBearer || rec.Auth.Token != a.token:
			return nil, fmt.Errorf("agentkit: Register %s: the record's auth is not the agent's token as a bearer token", rec.Name)
		}
	}
	stored, _, err := mesh.Register(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("agentkit: register %s: %w", rec.Name, err)
	}
	a.log.Info("agentkit: registered", "agent", rec.Name, "endpoint", rec.Endpoint, "ttl_seconds", rec.TTLSeconds)
	loop, cancel := context.WithCancel(context.Background())
	r := &Registration{mesh: mesh, rec: rec, log: a.log, cancel: cancel, done: make(chan struct{}), stored: stored}
	if rec.TTLSeconds > 0 {
		go r.heartbeat(loop, max(time.Duration(rec.TTLSeconds)*time.Second/3, time.Second))
	} else {
		close(r.done)
	}
	return r, nil
}

// Agent returns the agent's record as the mesh last returned it, from
// the registration or the latest heartbeat (its LastSeen, Owner, …;
// never the auth token).
func (r *Registration) Agent() registry.Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stored.Clone()
}

// heartbeat sends a heartbeat every interval until ctx ends.
func (r *Registration) heartbeat(ctx context.Context, every time.Duration) {
	defer close(r.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		callCtx, cancel := context.WithTimeout(ctx, every)
		stored, err := r.mesh.Heartbeat(callCtx, r.rec.Name)
		if errors.Is(err, registry.ErrNotFound) {
			stored, _, err = r.mesh.Register(callCtx, r.rec)
			if err == nil {
				r.log.Info("agentkit: registered again (the mesh had lost the agent)", "agent", r.rec.Name)
			}
		}
		cancel()
		switch {
		case err == nil:
			r.mu.Lock()
			r.stored = stored
			r.mu.Unlock()
		case ctx.Err() == nil:
			r.log.Warn("agentkit: heartbeat failed", "agent", r.rec.Name, "err", err)
		}
	}
}

// Close stops the heartbeats and unregisters the agent (DELETE
// /v1/agents/{name}); an agent the mesh no longer has is not an error.
// It is idempotent and safe to call concurrently: every call returns the
// first one's result.
func (r *Registration) Close(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.closeOnce.Do(func() {
		r.cancel()
		<-r.done
		r.closeErr = unregister(ctx, r.mesh, r.log, r.rec.Name)
	})
	return r.closeErr
}

// unregister deletes the agent name from mesh (DELETE
// /v1/agents/{name}); an agent the mesh does not have is not an error.
func unregister(ctx context.Context, mesh *client.Client, log *slog.Logger, name string) error {
	err := mesh.Delete(ctx, name)
	switch {
	case err == nil, errors.Is(err, registry.ErrNotFound):
		log.Info("agentkit: unregistered", "agent", name)
		return nil
	default:
		return fmt.Errorf("agentkit: unregister %s: %w", name, err)
	}
}
