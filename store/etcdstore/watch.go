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

// watchPrefix is the watch of the WatchAgents and WatchBreakers methods:
// it reads every key under prefix at one revision and reports them as a
// snapshot (reset true, at that revision), then watches the prefix from
// the next revision on and reports each batch of events etcd sends (at
// the revision of its last event), starting over as rewatch says. what
// names the records in the call's name and in the log ("agents").
//
// report runs on the caller's goroutine, one report at a time. It returns
// ctx's error once ctx is done, and an error wrapping [ErrClosed] once the
// store is closed.
func (s *Store) watchPrefix(ctx context.Context, what, prefix string, report func(reset bool, rev int64, kvs []watched)) error {
	return s.rewatch(ctx, what,
		func(ctx context.Context) (int64, error) { return s.reportSnapshot(ctx, prefix, report) },
		func(ctx context.Context, rev int64) error { return s.follow(ctx, prefix, rev, report) })
}

// rewatch is the loop of every watch of the store: snapshot reads and
// reports what is watched at one revision, which it returns; follow
// watches from the next revision on until the watch ends — its revision
// was compacted, the cluster lost its leader, the connection broke.
// rewatch then takes a new snapshot and follows again, waiting between
// failed attempts. what names the watch in the call's name and in the
// log. It returns ctx's error once ctx is done, and an error wrapping
// [ErrClosed] once the store is closed.
func (s *Store) rewatch(ctx context.Context, what string, snapshot func(context.Context) (int64, error), follow func(context.Context, int64) error) error {
	c, err := s.begin(ctx, "watch "+what, false)
	if err != nil {
		return err
	}
	defer c.end()
	wait := watchRetryMin
	for {
		rev, err := snapshot(c.ctx)
		if err == nil {
			err = follow(c.ctx, rev)
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
	ctx, cancel := s.boundedRead(ctx)
	defer cancel()
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

// boundedRead bounds ctx by the request timeout, for the reads of a watch
// (which is not bounded as a whole).
func (s *Store) boundedRead(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, s.timeout, errNoAnswer)
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
