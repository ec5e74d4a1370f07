package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Sentinel errors. Match them with [errors.Is]; the errors returned wrap
// them with the operation and the key involved.
var (
	// ErrClosed is returned by every method after [Store.Close], and by
	// calls that were in flight when Close ran.
	ErrClosed = errors.New("etcdstore: closed")

	// ErrUnavailable is returned when etcd did not answer within
	// [Options.DialTimeout] (at [Open]) or [Options.RequestTimeout] (any
	// other call): the endpoints are wrong, or the cluster is down or has
	// no leader.
	ErrUnavailable = errors.New("etcdstore: etcd unavailable")

	// ErrCorrupt is returned by reads that find a value under the store's
	// prefix that they cannot decode: a key written by something other
	// than this store, or by a newer version of it.
	ErrCorrupt = errors.New("etcdstore: undecodable value")

	// ErrSchemaTooNew is returned by [Open] when the prefix holds a store
	// written by a newer version of agentmesh, whose schema version this
	// build does not know.
	ErrSchemaTooNew = errors.New("etcdstore: store schema is newer than this build supports")

	// ErrOwnerLost is returned by [Store.HoldOwner] when the owner's
	// lease ended while it was held: etcd expired it (no keep-alive for
	// its TTL), or etcd did not answer the keep-alives for that long.
	ErrOwnerLost = errors.New("etcdstore: delegation owner lost: its lease ended")
)

// SchemaVersion is the version of the key layout this build writes, stored
// under <prefix>meta/schema_version.
const SchemaVersion = 1

// Defaults of [Options].
const (
	DefaultPrefix            = "/agentmesh/"
	DefaultDialTimeout       = 5 * time.Second
	DefaultRequestTimeout    = 10 * time.Second
	DefaultSessionLeaseGrace = time.Hour
	DefaultOwnerTTL          = 5 * time.Second
)

// orphanCheckInterval is how often [Store.WatchOrphans] looks for running
// records of dead owners besides reacting to owners' deaths.
const orphanCheckInterval = time.Minute

// maxSendBytes is the largest request the client sends: a delegation
// record with a 4 MiB result, JSON-escaped, fits. The server must accept
// it too (etcd --max-request-bytes; docs/DEPLOYMENT.md).
const maxSendBytes = 10 << 20

// Options configures [Open]. A nil *Options is refused: Endpoints is
// required. The zero value of every other field is its documented default.
type Options struct {
	// Endpoints are the client URLs of the etcd cluster, e.g.
	// "http://10.0.0.1:2379" or "10.0.0.1:2379". Required.
	Endpoints []string

	// TLS configures TLS to etcd. Nil means plain connections (endpoints
	// given as https:// still use TLS with the system roots).
	TLS *tls.Config

	// Username and Password authenticate to an etcd with auth enabled.
	// Empty means no authentication.
	Username, Password string

	// Prefix is the key prefix every key of the store lives under, so that
	// several meshes (or a mesh and other software) can share a cluster.
	// Empty means [DefaultPrefix] ("/agentmesh/"); a "/" is appended when
	// it does not end in one. Every replica of one mesh must use the same
	// prefix.
	Prefix string

	// DialTimeout bounds Open's first exchange with etcd (reading or
	// writing the schema version): Open fails with [ErrUnavailable] when
	// etcd does not answer in time. Zero means [DefaultDialTimeout] (5 s).
	DialTimeout time.Duration

	// RequestTimeout bounds every other call (all its round trips,
	// retries included) when the caller's context allows longer: the
	// call then fails with [ErrUnavailable]. Without it a call would wait
	// for an unreachable cluster as long as its context lets it. Zero
	// means [DefaultRequestTimeout] (10 s); negative means no bound but
	// the context's.
	RequestTimeout time.Duration

	// SessionLeaseGrace is how long a session's keys outlive its
	// ExpiresAt: they carry an etcd lease ending that long after it, so
	// that sessions vanish even when no replica sweeps them, without
	// overtaking the session Manager (which decides expiry on its own
	// clock and sweeps with [Store.DeleteExpiredSessions]). Zero means
	// [DefaultSessionLeaseGrace] (1 h); negative means sessions carry no
	// lease.
	SessionLeaseGrace time.Duration

	// OwnerTTL is the TTL of the lease each delegation owner (one per
	// replica's delegation client; see [Store.HoldOwner]) keeps alive:
	// when a replica dies, the others interrupt its running delegations
	// about this long after its last keep-alive. A shorter TTL notices a
	// death sooner but declares dead a replica cut off from etcd sooner
	// too. Rounded up to whole seconds; zero or negative means
	// [DefaultOwnerTTL] (5 s). Every replica of one mesh should use the
	// same.
	OwnerTTL time.Duration

	// Logger receives lifecycle events at Info level (opened, closed) and
	// watch restarts at Warn. Nil means discard.
	Logger *slog.Logger
}

// Store is a [registry.Store] (with [registry.WatchableStore]),
// [delegation.Store] (with [delegation.OwnerStore]), [breaker.Store] (with
// [breaker.WatchableStore]), [session.Store] and [audit.Store] kept in
// etcd under one key prefix.
// Open it with [Open] and release it with [Store.Close]. Several Stores —
// one per replica — may share a prefix: that is what the store is for.
//
// A Store is safe for concurrent use by multiple goroutines and starts no
// goroutines of its own ([Store.WatchAgents], [Store.WatchBreakers],
// [Store.WatchOrphans] and [Store.HoldOwner] run on their callers'; the
// etcd client runs the keep-alives of HoldOwner's lease).
//
// The zero value is inert: every method returns an error wrapping
// [ErrClosed], and Close returns nil.
type Store struct {
	cli          *clientv3.Client
	prefix       string
	endpoints    string // for messages
	timeout      time.Duration
	sessionGrace time.Duration // < 0: no session leases
	ownerTTL     int64         // seconds
	log          *slog.Logger

	// orphanCheck is how often WatchOrphans looks for running records of
	// dead owners besides reacting to deaths. Tests shorten it.
	orphanCheck time.Duration

	// agentLease returns the lease TTL, in seconds, of an agent with TTL
	// ttlSeconds: its removal horizon. Tests shorten it.
	agentLease func(ttlSeconds int) int64

	mu     sync.Mutex
	closed bool
	ops    map[uint64]context.CancelCauseFunc // calls in flight, cancelled by Close
	nextOp uint64
	wg     sync.WaitGroup // calls in flight

	closeOnce sync.Once
	closeErr  error

	keysMu sync.Mutex
	keys   map[string]*keyLock // keys with a read-modify-write in flight here
}

// keyLock serialises the read-modify-writes of one key within a Store:
// writers in one process then never conflict with each other, only with
// other replicas, so a hot key costs one transaction per write instead
// of a round of retries. A channel, so that waiting honours the context.
type keyLock struct {
	ch   chan struct{}
	refs int
}

// lockKey waits, until ctx is done, for the write lock of key, and returns
// its unlock function.
func (s *Store) lockKey(ctx context.Context, key string) (unlock func(), err error) {
	s.keysMu.Lock()
	if s.keys == nil {
		s.keys = make(map[string]*keyLock)
	}
	kl := s.keys[key]
	if kl == nil {
		kl = &keyLock{ch: make(chan struct{}, 1)}
		s.keys[key] = kl
	}
	kl.refs++
	s.keysMu.Unlock()
	release := func() {
		s.keysMu.Lock()
		if kl.refs--; kl.refs == 0 {
			delete(s.keys, key)
		}
		s.keysMu.Unlock()
	}
	select {
	case kl.ch <- struct{}{}:
		return func() { <-kl.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// Open connects to the etcd cluster of opts.Endpoints and returns a Store
// over the key prefix opts.Prefix. It checks the store's schema version
// under the prefix, writing it on first use; that exchange is bounded by
// ctx and opts.DialTimeout. Its errors wrap:
//   - [ErrUnavailable] when etcd does not answer in time;
//   - [ErrSchemaTooNew] when the prefix holds a newer store;
//   - [ErrCorrupt] when the schema version key holds something else;
//   - ctx's error when ctx is done first.
//
// The returned Store owns its etcd client; [Store.Close] closes it.
func Open(ctx context.Context, opts *Options) (*Store, error) {
	if opts == nil || len(opts.Endpoints) == 0 {
		return nil, errors.New("etcdstore: open: no etcd endpoints")
	}
	o := *opts
	o.Endpoints = append([]string(nil), o.Endpoints...)
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.SessionLeaseGrace == 0 {
		o.SessionLeaseGrace = DefaultSessionLeaseGrace
	}
	if o.OwnerTTL <= 0 {
		o.OwnerTTL = DefaultOwnerTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            o.Endpoints,
		DialTimeout:          o.DialTimeout,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		MaxCallSendMsgSize:   maxSendBytes,
		TLS:                  o.TLS,
		Username:             o.Username,
		Password:             o.Password,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: open %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	s := &Store{
		cli:          cli,
		prefix:       o.Prefix,
		endpoints:    strings.Join(o.Endpoints, ","),
		timeout:      o.RequestTimeout,
		sessionGrace: o.SessionLeaseGrace,
		ownerTTL:     leaseSeconds(o.OwnerTTL),
		log:          o.Logger,
		orphanCheck:  orphanCheckInterval,
		agentLease:   removalHorizon,
		ops:          make(map[uint64]context.CancelCauseFunc),
	}
	version, created, err := s.checkSchema(ctx, o.DialTimeout)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	s.log.Info("etcdstore: opened", "endpoints", s.endpoints, "prefix", s.prefix, "schema", version, "created", created)
	return s, nil
}

// errNoAnswer is the cause of the contexts the store's own timeouts
// cancel, so that their expiry can be told from the caller's.
var errNoAnswer = errors.New("etcdstore: no answer in time")

// checkSchema reads the schema version under the prefix, writing
// SchemaVersion when there is none.
func (s *Store) checkSchema(ctx context.Context, timeout time.Duration) (version int, created bool, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errNoAnswer)
	defer cancel()
	key := s.prefix + "meta/schema_version"
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.Itoa(SchemaVersion))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		if context.Cause(ctx) == errNoAnswer {
			return 0, false, fmt.Errorf("etcdstore: open %s: %w: no answer within %s: %w", s.endpoints, ErrUnavailable, timeout, err)
		}
		return 0, false, fmt.Errorf("etcdstore: open %s: %w", s.endpoints, err)
	}
	if resp.Succeeded {
		return SchemaVersion, true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 { // deleted between the compare and the get: cannot happen in one txn
		return 0, false, fmt.Errorf("etcdstore: open: %w: schema version key vanished", ErrCorrupt)
	}
	version, err = strconv.Atoi(string(kvs[0].Value))
	switch {
	case err != nil || version < 1:
		return 0, false, fmt.Errorf("etcdstore: open: %w: schema version %q under %s", ErrCorrupt, kvs[0].Value, key)
	case version > SchemaVersion:
		return 0, false, fmt.Errorf("etcdstore: open: %w: version %d, this build knows %d", ErrSchemaTooNew, version, SchemaVersion)
	}
	// Version 1 is the first: nothing to migrate from yet.
	return version, false, nil
}

// Close cancels the calls in flight (they fail with [ErrClosed]), waits
// for them, watches included ([Store.WatchAgents],
// [Store.WatchBreakers], [Store.WatchOrphans]) and [Store.HoldOwner],
// whose leases it leaves to expire, and closes the etcd client. Nothing
// is lost by closing: every write that returned nil is committed in
// etcd. Close is idempotent and safe for concurrent use; later calls
// return the first call's result.
func (s *Store) Close() error {
	if s.cli == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for _, cancel := range s.ops {
			cancel(ErrClosed)
		}
		s.mu.Unlock()
		s.wg.Wait()
		if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("etcdstore: close: %w", err)
		}
		s.log.Info("etcdstore: closed", "endpoints", s.endpoints, "prefix", s.prefix)
	})
	return s.closeErr
}

// call is one method call in flight: its context, which Close and the
// request timeout cancel, and what it is, for error messages.
type call struct {
	s   *Store
	op  string
	ctx context.Context
	end func()
}

// begin starts a call named op: it fails with ctx's error when ctx is
// done, and with ErrClosed after Close. bounded says whether the call is
// subject to the request timeout (a watch is not). The caller must call
// c.end() when the call is over.
func (s *Store) begin(ctx context.Context, op string, bounded bool) (*call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.cli == nil {
		return nil, fmt.Errorf("etcdstore: %s: %w", op, ErrClosed)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel(ErrClosed)
		return nil, fmt.Errorf("etcdstore: %s: %w", op, ErrClosed)
	}
	id := s.nextOp
	s.nextOp++
	s.ops[id] = cancel
	s.wg.Add(1)
	s.mu.Unlock()

	stop := func() {}
	if bounded && s.timeout > 0 {
		var cancelT context.CancelFunc
		cctx, cancelT = context.WithTimeoutCause(cctx, s.timeout, errNoAnswer)
		stop = cancelT
	}
	return &call{s: s, op: op, ctx: cctx, end: func() {
		stop()
		s.mu.Lock()
		delete(s.ops, id)
		s.mu.Unlock()
		cancel(nil)
		s.wg.Done()
	}}, nil
}

// fail wraps err, an error of one of the call's round trips, with the
// call's name and what caused it: Close, the request timeout, or the
// caller's context.
func (c *call) fail(err error) error {
	s := c.s
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("etcdstore: %s: %w", c.op, ErrClosed)
	case context.Cause(c.ctx) == errNoAnswer:
		return fmt.Errorf("etcdstore: %s: %w: no answer from %s within %s: %w", c.op, ErrUnavailable, s.endpoints, s.timeout, err)
	}
	return fmt.Errorf("etcdstore: %s: %w", c.op, err)
}

// conflict reports whether err means the transaction should be retried
// after reading again: a lease it meant to reuse expired meanwhile.
func conflict(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// maxTxnOps is the most operations (or comparisons) the store puts in one
// transaction: under etcd's default --max-txn-ops of 128.
const maxTxnOps = 120

// guarded is one deletion of a sweep: ops, to run only while cmp holds
// (the entry that named the record has not moved since it was read).
type guarded struct {
	cmp clientv3.Cmp
	ops []clientv3.Op
}

// commitGuarded runs gs in one transaction if every comparison holds; else
// it runs each in a transaction of its own, skipping those whose comparison
// fails. It returns how many ran. done, if not nil, is called with the index
// and the responses of the ops of each one that ran, once its transaction
// committed.
func (s *Store) commitGuarded(ctx context.Context, gs []guarded, done func(i int, rs []*etcdserverpb.ResponseOp)) (int, error) {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	for _, g := range gs {
		cmps = append(cmps, g.cmp)
		ops = append(ops, g.ops...)
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, err
	}
	if resp.Succeeded {
		if done != nil {
			off := 0
			for i, g := range gs {
				done(i, resp.Responses[off:off+len(g.ops)])
				off += len(g.ops)
			}
		}
		return len(gs), nil
	}
	n := 0
	for i, g := range gs {
		resp, err := s.cli.Txn(ctx).If(g.cmp).Then(g.ops...).Commit()
		if err != nil {
			return n, err
		}
		if resp.Succeeded {
			n++
			if done != nil {
				done(i, resp.Responses)
			}
		}
	}
	return n, nil
}

// rangeAll calls fn with every key-value under prefix, in ascending key
// order, read at revision rev (0: the latest, which is then fixed for
// every page), page by page. It returns the revision read.
func (s *Store) rangeAll(ctx context.Context, prefix string, rev int64, fn func(kv *kvPair) error) (int64, error) {
	const page = 500
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(page)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(pairOf(kv)); err != nil {
				return rev, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// kvPair is a key-value as read: the key, its value, its mod revision and
// its lease (0 for none).
type kvPair struct {
	key   string
	value []byte
	mod   int64
	lease int64
}
