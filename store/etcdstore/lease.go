package etcdstore

import (
	"context"
	"math"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/registry"
)

// maxLeaseTTL is the longest lease etcd grants, in seconds.
const maxLeaseTTL = 9_000_000_000

// removalHorizon is the lease TTL, in seconds, of an agent whose TTL is
// ttlSeconds: the TTL plus the registry's grace of GraceTTLs × TTL, after
// which the registry removes an agent that was not seen
// (docs/AGENTS.md#lifetime-ttl-and-heartbeats).
func removalHorizon(ttlSeconds int) int64 {
	return min(int64(1+registry.GraceTTLs)*int64(ttlSeconds), maxLeaseTTL)
}

// leaseSeconds rounds d up to whole seconds, at least 1 and at most
// maxLeaseTTL.
func leaseSeconds(d time.Duration) int64 {
	sec := math.Ceil(d.Seconds())
	switch {
	case sec < 1:
		return 1
	case sec > maxLeaseTTL:
		return maxLeaseTTL
	}
	return int64(sec)
}

// leases are the leases one write call granted, by the record they are
// for ("agent", "upd", "next"), so that a retry reuses them and the call
// revokes those its committed write did not use. A lease is never shared
// by two records: revoking a record's old lease after a write moved it to
// a new one deletes nothing else.
type leases struct {
	c       *call
	granted map[string]granted
}

type granted struct {
	id  clientv3.LeaseID
	ttl int64
}

// grant returns a lease of ttl seconds for the record called slot:
// the one granted for it by an earlier attempt of this call when its TTL
// is the same, else a new one.
func (l *leases) grant(slot string, ttl int64) (clientv3.LeaseID, error) {
	if g, ok := l.granted[slot]; ok {
		if g.ttl == ttl {
			return g.id, nil
		}
		l.revoke(g.id)
		delete(l.granted, slot)
	}
	resp, err := l.c.s.cli.Grant(l.c.ctx, ttl)
	if err != nil {
		return 0, err
	}
	if l.granted == nil {
		l.granted = make(map[string]granted)
	}
	l.granted[slot] = granted{id: resp.ID, ttl: ttl}
	return resp.ID, nil
}

// committed forgets the leases a committed write used, and revokes the
// leases the write replaced (old, 0 for none), which no key holds any
// more.
func (l *leases) committed(used []clientv3.LeaseID, old ...clientv3.LeaseID) {
	for slot, g := range l.granted {
		for _, id := range used {
			if g.id == id {
				delete(l.granted, slot)
			}
		}
	}
	for _, id := range old {
		keep := false
		for _, u := range used {
			keep = keep || u == id
		}
		if id != 0 && !keep {
			l.revoke(id)
		}
	}
}

// release revokes the leases granted and not used by a committed write.
func (l *leases) release() {
	for _, g := range l.granted {
		l.revoke(g.id)
	}
	l.granted = nil
}

// revoke revokes id, best effort: a lease that is not revoked holds no
// key and expires on its own.
func (l *leases) revoke(id clientv3.LeaseID) {
	if id == 0 || l.c.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(l.c.ctx, time.Second)
	defer cancel()
	_, _ = l.c.s.cli.Revoke(ctx, id)
}
