package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watched is a key as a watch reports it: listed in a snapshot or changed
// by a commit.
type watched struct {
	key   string // the whole key
	value []byte // nil for a deletion
	rev   int64  // the mod revision (of the deletion, for a deletion)
	put   bool   // false for a deletion
}

// Waits between failed attempts to read a snapshot and watch again.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// watchPrefix is the loop of the Watch methods: it reads every key under
// prefix at one revision and reports them as a snapshot (reset true, at
// that revision), then watches the prefix from the next revision on and
// reports each batch of events etcd sends (at the revision of its last
// event). When the watch ends — its revision was compacted, the cluster
// lost its leader, the connection broke — it reads and reports a new
// snapshot and watches again, waiting between failed attempts. what names
// the records in the call's name and in the log ("agents").
//
// report runs on the caller's goroutine, one report at a time. It returns
// ctx's error once ctx is done, and an error wrapping [ErrClosed] once the
// store is closed.
func (s *Store) watchPrefix(ctx context.Context, what, prefix string, report func(reset bool, rev int64, kvs []watched)) error {
	c, err := s.begin(ctx, "watch "+what, false)
	if err != nil {
		return err
	}
	defer c.end()
	wait := watchRetryMin
	for {
		rev, err := s.reportSnapshot(c.ctx, prefix, report)
		if err == nil {
			err = s.follow(c.ctx, prefix, rev, report)
			wait = watchRetryMin
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.ctx.Err() != nil {
			return c.fail(c.ctx.Err())
		}
		s.log.Warn("etcdstore: watch interrupted; reading a new snapshot", "what", what, "prefix", s.prefix, "err", err, "retry_in", wait.String())
		select {
		case <-c.ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, watchRetryMax)
	}
}

// reportSnapshot reads every key under prefix and reports them as a
// snapshot, returning the revision read.
func (s *Store) reportSnapshot(ctx context.Context, prefix string, report func(bool, int64, []watched)) (int64, error) {
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.timeout, errNoAnswer)
		defer cancel()
	}
	var kvs []watched
	rev, err := s.rangeAll(ctx, prefix, 0, func(kv *kvPair) error {
		kvs = append(kvs, watched{key: kv.key, value: kv.value, rev: kv.mod, put: true})
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", prefix, err)
	}
	report(true, rev, kvs)
	return rev, nil
}

// follow watches the keys under prefix after revision rev and reports
// every batch of events, until the watch ends.
func (s *Store) follow(ctx context.Context, prefix string, rev int64, report func(bool, int64, []watched)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if len(resp.Events) == 0 {
			continue // progress notification
		}
		kvs := make([]watched, len(resp.Events))
		for i, ev := range resp.Events {
			kvs[i] = watched{key: string(ev.Kv.Key), rev: ev.Kv.ModRevision, put: ev.Type == mvccpb.PUT}
			if kvs[i].put {
				kvs[i].value = ev.Kv.Value
			}
		}
		report(false, resp.Events[len(resp.Events)-1].Kv.ModRevision, kvs)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch: channel closed")
}
