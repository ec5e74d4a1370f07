package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/delegation"
)

var _ delegation.OwnerStore = (*Store)(nil)

// Delegation owners. A delegation client over the store holds an owner id
// (delegation.OwnerStore) and stamps it on the records it creates; a
// running record with an owner has an entry under by_owner/<owner>/. An
// owner is alive while its key, delegations/owners/<owner>, exists: the
// key is on a lease of Options.OwnerTTL that the owner's HoldOwner call
// keeps alive, so etcd deletes it when the owner's process dies (or is
// cut off from etcd for a TTL). Every replica's WatchOrphans watches the
// owner keys and reports the running records of an owner whose key is
// deleted, or found missing.

// orphanChunk is the most record ids WatchOrphans reports in one call.
const orphanChunk = 500

// ownerKey is the liveness key of owner.
func (s *Store) ownerKey(owner string) string {
	return s.prefix + delegationOwners + url.PathEscape(owner)
}

// ownerIndex is the prefix of the by_owner index entries of owner.
func (s *Store) ownerIndex(owner string) string {
	return s.prefix + delegationByOwner + url.PathEscape(owner) + "/"
}

// HoldOwner implements [delegation.OwnerStore.HoldOwner]: it grants a
// lease of Options.OwnerTTL, puts the owner's key on it (refusing an
// owner whose key exists), calls held, and keeps the lease alive (the
// etcd client sends a keep-alive every third of the TTL) until one of:
//   - ctx is done: it revokes the lease, so that the owner is dead for the
//     other replicas at once, and returns ctx's error;
//   - the lease ended (etcd expired it, or did not answer the keep-alives
//     for a TTL): it revokes it to be sure and returns an error wrapping
//     [ErrOwnerLost];
//   - the store is closed: it returns an error wrapping [ErrClosed] and
//     leaves the lease to expire after its TTL, as when the process dies.
//
// Granting the lease and putting the key are bounded by
// Options.RequestTimeout; an error there fails the call before held.
func (s *Store) HoldOwner(ctx context.Context, owner string, held func()) error {
	if owner == "" {
		return errors.New("etcdstore: hold delegation owner: empty owner id")
	}
	op := fmt.Sprintf("hold delegation owner %q", owner)
	lease, err := s.takeOwner(ctx, op, owner)
	if err != nil {
		return err
	}
	c, err := s.begin(ctx, op, false)
	if err != nil {
		s.revokeOwner(lease)
		return err
	}
	defer c.end()
	ka, err := s.cli.KeepAlive(c.ctx, lease)
	if err != nil {
		s.revokeOwner(lease)
		return c.fail(err)
	}
	held()
	for range ka {
		// Each response only says the lease lives on.
	}
	switch {
	case ctx.Err() != nil:
		s.revokeOwner(lease)
		return ctx.Err()
	case c.ctx.Err() != nil:
		return c.fail(c.ctx.Err())
	}
	s.revokeOwner(lease)
	return fmt.Errorf("etcdstore: %s: %w", op, ErrOwnerLost)
}

// takeOwner grants the lease of owner and puts its key on it.
func (s *Store) takeOwner(ctx context.Context, op, owner string) (clientv3.LeaseID, error) {
	c, err := s.begin(ctx, op, true)
	if err != nil {
		return 0, err
	}
	defer c.end()
	g, err := s.cli.Grant(c.ctx, s.ownerTTL)
	if err != nil {
		return 0, c.fail(err)
	}
	key := s.ownerKey(owner)
	resp, err := s.cli.Txn(c.ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, time.Now().UTC().Format(time.RFC3339Nano), clientv3.WithLease(g.ID))).
		Commit()
	if err == nil && !resp.Succeeded {
		err = errors.New("the owner id is already held")
	}
	if err != nil {
		s.revokeOwner(g.ID)
		return 0, c.fail(err)
	}
	return g.ID, nil
}

// revokeOwner revokes an owner's lease, best effort and for at most its
// TTL: a lease not revoked expires after that anyway.
func (s *Store) revokeOwner(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.ownerTTL)*time.Second)
	defer cancel()
	_, _ = s.cli.Revoke(ctx, id)
}

// WatchOrphans implements [delegation.OwnerStore.WatchOrphans]. It reads
// the owner keys and the by_owner index at one revision and reports the
// running records of every owner in the index that has no key; then it
// watches the owner keys from the next revision on and, for each one
// deleted, reports the owner's running records. Every minute it repeats
// the first check, for records written under an owner after its key was
// deleted (by a process that did not know yet). When the watch ends (its
// revision was compacted, the cluster lost its leader, the connection
// broke) it starts again from the first check, waiting between failed
// attempts. Each check costs the owner keys and the index entries of
// running records, never the other records.
//
// fn gets up to 500 ids a call. WatchOrphans returns ctx's error once ctx
// is done, and an error wrapping [ErrClosed] once the store is closed.
func (s *Store) WatchOrphans(ctx context.Context, fn func(owner string, ids []string)) error {
	return s.rewatch(ctx, "delegation owners",
		func(ctx context.Context) (int64, error) { return s.reportOrphans(ctx, fn) },
		func(ctx context.Context, rev int64) error { return s.followOwners(ctx, rev, fn) })
}

// reportOrphans reports the running records of the owners in the
// by_owner index that have no key, both read at one revision, which it
// returns. A record in the index at that revision was written after its
// owner's key (a client stamps an owner only once it is held), so a
// missing key is a deleted one: the owner is dead.
func (s *Store) reportOrphans(ctx context.Context, fn func(string, []string)) (int64, error) {
	orphans, rev, err := s.findOrphans(ctx)
	if err != nil {
		return 0, err
	}
	owners := make([]string, 0, len(orphans))
	for o := range orphans {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	for _, o := range owners {
		for ids := range slices.Chunk(orphans[o], orphanChunk) {
			fn(o, ids)
		}
	}
	return rev, nil
}

// findOrphans returns the ids of the running records of dead owners, by
// owner, and the revision read.
func (s *Store) findOrphans(ctx context.Context) (map[string][]string, int64, error) {
	ctx, cancel := s.boundedRead(ctx)
	defer cancel()
	live := make(map[string]bool)
	rev, err := s.rangeAll(ctx, s.prefix+delegationOwners, 0, func(kv *kvPair) error {
		live[kv.key[len(s.prefix)+len(delegationOwners):]] = true
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read delegation owners: %w", err)
	}
	orphans := make(map[string][]string)
	index := s.prefix + delegationByOwner
	_, err = s.rangeAll(ctx, index, rev, func(kv *kvPair) error {
		esc, id, ok := strings.Cut(kv.key[len(index):], "/")
		if !ok || live[esc] {
			return nil
		}
		owner, err := url.PathUnescape(esc)
		if err != nil {
			return fmt.Errorf("%w: index key %q", ErrCorrupt, kv.key)
		}
		orphans[owner] = append(orphans[owner], id)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read delegations by owner: %w", err)
	}
	return orphans, rev, nil
}

// followOwners watches the owner keys after revision rev and reports the
// running records of each owner deleted, checking for orphans every
// s.orphanCheck, until the watch ends.
func (s *Store) followOwners(ctx context.Context, rev int64, fn func(string, []string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prefix := s.prefix + delegationOwners
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	tick := time.NewTicker(s.orphanCheck)
	defer tick.Stop()
	for {
		select {
		case resp, ok := <-wch:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return errors.New("watch: channel closed")
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			for _, ev := range resp.Events {
				if ev.Type != mvccpb.DELETE {
					continue
				}
				owner, err := url.PathUnescape(string(ev.Kv.Key)[len(prefix):])
				if err != nil {
					return fmt.Errorf("%w: owner key %q", ErrCorrupt, ev.Kv.Key)
				}
				if err := s.reportOwner(ctx, owner, fn); err != nil {
					return err
				}
			}
		case <-tick.C:
			if _, err := s.reportOrphans(ctx, fn); err != nil {
				return err
			}
		}
	}
}

// reportOwner reports the running records of the dead owner.
func (s *Store) reportOwner(ctx context.Context, owner string, fn func(string, []string)) error {
	rctx, cancel := s.boundedRead(ctx)
	index := s.ownerIndex(owner)
	var ids []string
	_, err := s.rangeAll(rctx, index, 0, func(kv *kvPair) error {
		ids = append(ids, kv.key[len(index):])
		return nil
	})
	cancel()
	if err != nil {
		return fmt.Errorf("read delegations of owner %q: %w", owner, err)
	}
	for chunk := range slices.Chunk(ids, orphanChunk) {
		fn(owner, chunk)
	}
	return nil
}
