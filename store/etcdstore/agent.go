package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/registry"
)

var (
	_ registry.Store          = (*Store)(nil)
	_ registry.WatchableStore = (*Store)(nil)
)

// agentsPrefix is the prefix of the agent keys: <prefix>agents/<name>.
func (s *Store) agentsPrefix() string { return s.prefix + "agents/" }

// GetAgent returns the agent stored under name, token included, or an
// error wrapping [registry.ErrNotFound]. It reads with one linearizable
// range request.
func (s *Store) GetAgent(ctx context.Context, name string) (registry.Agent, error) {
	c, err := s.begin(ctx, fmt.Sprintf("get agent %q", name), true)
	if err != nil {
		return registry.Agent{}, err
	}
	defer c.end()
	if name == "" {
		return registry.Agent{}, fmt.Errorf("etcdstore: agent %q: %w", name, registry.ErrNotFound)
	}
	resp, err := s.cli.Get(c.ctx, s.agentsPrefix()+name)
	if err != nil {
		return registry.Agent{}, c.fail(err)
	}
	if len(resp.Kvs) == 0 {
		return registry.Agent{}, fmt.Errorf("etcdstore: agent %q: %w", name, registry.ErrNotFound)
	}
	var a registry.Agent
	if err := decodeAgent(name, resp.Kvs[0].Value, &a); err != nil {
		return registry.Agent{}, err
	}
	return a, nil
}

// ListAgents returns every stored agent, tokens included, in ascending
// name order (byte-wise, as [strings.Compare]), read at one revision in
// pages of 500. An empty store gives an empty slice and no error.
func (s *Store) ListAgents(ctx context.Context) ([]registry.Agent, error) {
	c, err := s.begin(ctx, "list agents", true)
	if err != nil {
		return nil, err
	}
	defer c.end()
	out, _, err := s.readAgents(c.ctx)
	if err != nil {
		return nil, c.fail(err)
	}
	return out, nil
}

// readAgents reads every stored agent and the revision it read them at.
// Values that do not decode fail the read with ErrCorrupt.
func (s *Store) readAgents(ctx context.Context) ([]registry.Agent, int64, error) {
	prefix := s.agentsPrefix()
	out := []registry.Agent{}
	rev, err := s.rangeAll(ctx, prefix, 0, func(kv *kvPair) error {
		var a registry.Agent
		if err := decodeAgent(kv.key[len(prefix):], kv.value, &a); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	})
	return out, rev, err
}

// UpdateAgent implements [registry.Store.UpdateAgent] as an optimistic
// transaction; see [Store.UpdateAgentRevision].
func (s *Store) UpdateAgent(ctx context.Context, name string, fn func(cur *registry.Agent) (*registry.Agent, error)) error {
	_, err := s.UpdateAgentRevision(ctx, name, fn)
	return err
}

// UpdateAgentRevision implements [registry.WatchableStore]: it reads the
// agent stored under name, calls fn with a fresh copy of it (nil when
// there is none) and commits what fn returns — a non-nil agent is stored
// under name, nil deletes the record — in a transaction that compares the
// key's mod revision with the one read. When another writer (another
// replica) changed the key meanwhile, the comparison fails and it reads
// again and calls fn again, until it commits or its context ends. It
// returns the revision of the commit (0 when nothing was written).
//
// An agent with a TTL (TTLSeconds > 0) is written with an etcd lease of
// its removal horizon, TTL + 3 × TTL, so that etcd deletes an agent no
// replica saw for that long even when no replica sweeps. A write that
// changes LastSeen (a heartbeat, a re-registration) renews the lease with
// one keep-alive; a write that changes the TTL moves the record to a new
// lease and revokes the old one; a write that clears the TTL detaches it.
//
// Writes to one name from one Store are serialised (so they do not
// conflict with each other, only with other replicas): fn must not call
// UpdateAgent for the same name on the same Store, which would wait for
// itself. If fn returns an error, it returns that error unchanged and
// writes nothing. A panic in fn propagates to the caller with nothing
// written.
func (s *Store) UpdateAgentRevision(ctx context.Context, name string, fn func(cur *registry.Agent) (*registry.Agent, error)) (int64, error) {
	switch {
	case fn == nil:
		return 0, fmt.Errorf("etcdstore: update agent %q: nil function", name)
	case name == "":
		return 0, errors.New("etcdstore: update agent: empty name")
	}
	c, err := s.begin(ctx, fmt.Sprintf("update agent %q", name), true)
	if err != nil {
		return 0, err
	}
	defer c.end()
	ls := &leases{c: c}
	defer ls.release()
	key := s.agentsPrefix() + name
	unlock, err := s.lockKey(c.ctx, key)
	if err != nil {
		return 0, c.fail(err)
	}
	defer unlock()
	for {
		resp, err := s.cli.Get(c.ctx, key)
		if err != nil {
			return 0, c.fail(err)
		}
		var cur *registry.Agent
		var kv *kvPair
		if len(resp.Kvs) > 0 {
			kv = pairOf(resp.Kvs[0])
			cur = new(registry.Agent)
			if err := decodeAgent(name, kv.value, cur); err != nil {
				return 0, err
			}
		}
		was := leaseBasis(cur)
		next, err := fn(cur)
		if err != nil {
			return 0, err
		}
		if next == nil && kv == nil {
			return 0, nil // deleting a missing record
		}
		rev, err := s.commitAgent(c, ls, key, kv, was, next)
		switch {
		case err == nil && rev > 0:
			return rev, nil
		case err != nil && !conflict(err):
			return 0, c.fail(err)
		case err != nil:
			ls.release() // a lease expired meanwhile: start afresh
		}
		if err := c.ctx.Err(); err != nil {
			return 0, c.fail(err)
		}
	}
}

// agentBasis is what the lease of a stored agent was chosen from.
type agentBasis struct {
	ttl      int
	lastSeen time.Time
}

func leaseBasis(a *registry.Agent) agentBasis {
	if a == nil {
		return agentBasis{}
	}
	return agentBasis{ttl: a.TTLSeconds, lastSeen: a.LastSeen}
}

// commitAgent writes next (nil: deletes) under key if the key is still as
// read (kv, nil when missing), with the lease next needs. It returns the
// revision of the commit, or 0 when the comparison failed.
func (s *Store) commitAgent(c *call, ls *leases, key string, kv *kvPair, was agentBasis, next *registry.Agent) (int64, error) {
	op := clientv3.OpDelete(key)
	var lease clientv3.LeaseID
	if next != nil {
		data, err := json.Marshal(next)
		if err != nil {
			return 0, fmt.Errorf("encode: %w", err)
		}
		if lease, err = s.agentLeaseFor(c, ls, kv, was, next); err != nil {
			return 0, err
		}
		op = clientv3.OpPut(key, string(data), clientv3.WithLease(lease))
	}
	resp, err := s.cli.Txn(c.ctx).If(unchanged(key, kv)).Then(op).Commit()
	if err != nil || !resp.Succeeded {
		return 0, err
	}
	ls.committed([]clientv3.LeaseID{lease}, leaseOf(kv))
	return resp.Header.Revision, nil
}

// agentLeaseFor returns the lease next is written with: none without a
// TTL; the stored record's lease when the TTL is unchanged (renewed when
// LastSeen moved); else a new lease of the removal horizon.
func (s *Store) agentLeaseFor(c *call, ls *leases, kv *kvPair, was agentBasis, next *registry.Agent) (clientv3.LeaseID, error) {
	if next.TTLSeconds <= 0 {
		return 0, nil
	}
	if id := leaseOf(kv); id != 0 && was.ttl == next.TTLSeconds {
		if next.LastSeen.Equal(was.lastSeen) {
			return id, nil
		}
		_, err := s.cli.KeepAliveOnce(c.ctx, id)
		if err == nil {
			return id, nil
		}
		if !conflict(err) {
			return 0, err
		}
		// Expired meanwhile (so has the record): a new lease.
	}
	return ls.grant("agent", s.agentLease(next.TTLSeconds))
}

// WatchAgents implements [registry.WatchableStore]: it reads every stored
// agent at one revision and reports them as a snapshot, then watches the
// agent keys from the next revision on and reports each batch of changes
// etcd sends. Lease expiries arrive as deletions. When the watch ends —
// its revision was compacted, the cluster lost its leader, the connection
// broke — it reads and reports a new snapshot and watches again, waiting
// between failed attempts (100 ms, doubling up to 5 s). Values that do not
// decode are left out, with a warning to the logger.
//
// It returns ctx's error once ctx is done, and an error wrapping
// [ErrClosed] once the store is closed.
func (s *Store) WatchAgents(ctx context.Context, fn func(registry.AgentChanges)) error {
	prefix := s.agentsPrefix()
	return s.watchPrefix(ctx, "agents", prefix, func(reset bool, rev int64, kvs []watched) {
		changes := make([]registry.AgentChange, 0, len(kvs))
		for _, kv := range kvs {
			if ch, ok := s.agentChange(prefix, kv); ok {
				changes = append(changes, ch)
			}
		}
		fn(registry.AgentChanges{Reset: reset, Revision: rev, Changes: changes})
	})
}

// agentChange decodes one watched or listed key into a change; ok is
// false for a value that does not decode (logged).
func (s *Store) agentChange(prefix string, kv watched) (registry.AgentChange, bool) {
	ch := registry.AgentChange{Name: kv.key[len(prefix):], Revision: kv.rev}
	if !kv.put {
		return ch, true
	}
	var a registry.Agent
	if err := decodeAgent(ch.Name, kv.value, &a); err != nil {
		s.log.Warn("etcdstore: agent record skipped", "key", kv.key, "err", err)
		return ch, false
	}
	ch.Agent = &a
	return ch, true
}

// decodeAgent decodes the stored value v of name into a.
func decodeAgent(name string, v []byte, a *registry.Agent) error {
	if err := json.Unmarshal(v, a); err != nil {
		return fmt.Errorf("%w: record of agent %q: %w", ErrCorrupt, name, err)
	}
	return nil
}

// pairOf returns the fields of kv the store uses.
func pairOf(kv *mvccpb.KeyValue) *kvPair {
	return &kvPair{key: string(kv.Key), value: kv.Value, mod: kv.ModRevision, lease: kv.Lease}
}

// unchanged is the comparison that key is still as read: kv, or missing
// when kv is nil.
func unchanged(key string, kv *kvPair) clientv3.Cmp {
	var mod int64
	if kv != nil {
		mod = kv.mod
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", mod)
}

// leaseOf returns the lease kv was read with, 0 for none or a nil kv.
func leaseOf(kv *kvPair) clientv3.LeaseID {
	if kv == nil {
		return 0
	}
	return clientv3.LeaseID(kv.lease)
}
