package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentmesh/agentmesh/registry"
)

// Sentinel errors. Match them with [errors.Is]; the errors returned wrap
// them with the path or the name involved.
var (
	// ErrClosed is returned by every method after [Store.Close], and by
	// writes still queued when Close ran.
	ErrClosed = errors.New("boltstore: closed")

	// ErrLocked is returned by [Open] when another process (or another
	// Store in this process) holds the file and did not release it within
	// [Options.Timeout].
	ErrLocked = errors.New("boltstore: file is locked by another process")

	// ErrCorrupt is returned by [Open] for a file that is damaged, truncated
	// or not a bbolt database at all, and by reads and writes that find a
	// record they cannot decode. The file is never reset or repaired: move
	// it aside or restore a backup.
	ErrCorrupt = errors.New("boltstore: file is damaged or not a bbolt database")

	// ErrNotStore is returned by [Open] for a file that is not an agentmesh
	// store: a zero-length file, a directory, or a valid bbolt database
	// without the store's meta bucket.
	ErrNotStore = errors.New("boltstore: not an agentmesh store")

	// ErrSchemaTooNew is returned by [Open] for a store written by a newer
	// version of agentmesh, whose schema version this build does not know.
	ErrSchemaTooNew = errors.New("boltstore: store schema is newer than this build supports")
)

// DefaultTimeout is how long [Open] waits for the file lock when
// [Options.Timeout] is zero.
const DefaultTimeout = time.Second

// Options configures [Open]. A nil *Options means the zero value, and the
// zero value of every field is its documented default.
type Options struct {
	// Timeout is how long Open waits for another holder of the file to
	// release it before failing with [ErrLocked]. Zero means
	// [DefaultTimeout] (1 s); a negative value means fail at once.
	Timeout time.Duration

	// Logger receives lifecycle events at Info level: the store was created,
	// opened, migrated to a new schema version, closed. Nil means discard.
	Logger *slog.Logger
}

var _ registry.Store = (*Store)(nil)

// Store is a [registry.Store], [delegation.Store] and [breaker.Store] kept
// in one bbolt file. Open it with [Open] and release it with [Store.Close].
//
// A Store is safe for concurrent use by multiple goroutines. It owns one
// committer goroutine, which applies every queued write in one fsync'd
// transaction (a group commit); Close stops it.
//
// The zero value is inert: every method returns an error wrapping
// [ErrClosed], and Close returns nil.
type Store struct {
	db   *bbolt.DB
	path string
	log  *slog.Logger

	mu      sync.Mutex // guards pending, and closed for writers
	pending []*request // writes waiting for the committer
	closed  atomic.Bool

	wake chan struct{} // capacity 1: pending is not empty
	quit chan struct{} // closed by Close
	done chan struct{} // closed when the committer has exited

	closeOnce sync.Once
	closeErr  error

	commits atomic.Uint64 // write transactions of the committer, for tests and benchmarks
	writes  atomic.Uint64 // requests they carried

	pruneChunkDone func() // test hook: called after each chunk of a prune commits
}

// GetAgent returns the agent stored under name, token included, or an
// error wrapping [registry.ErrNotFound]. It reads in a read-only
// transaction, concurrently with writers.
func (s *Store) GetAgent(ctx context.Context, name string) (registry.Agent, error) {
	if err := ctx.Err(); err != nil {
		return registry.Agent{}, err
	}
	var a registry.Agent
	found := false
	err := s.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketAgents).Get([]byte(name))
		if v == nil {
			return nil
		}
		found = true
		return decodeAgent(name, v, &a)
	})
	if err != nil {
		return registry.Agent{}, fmt.Errorf("boltstore: get agent %q: %w", name, err)
	}
	if !found {
		return registry.Agent{}, fmt.Errorf("boltstore: agent %q: %w", name, registry.ErrNotFound)
	}
	return a, nil
}

// ListAgents returns every stored agent, tokens included, in ascending
// name order (byte-wise, as [strings.Compare]), from one consistent
// snapshot. An empty store gives an empty slice and no error. It stops
// with ctx's error if ctx is done while it reads.
func (s *Store) ListAgents(ctx context.Context) ([]registry.Agent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []registry.Agent
	err := s.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketAgents).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(out)%256 == 255 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			var a registry.Agent
			if err := decodeAgent(string(k), v, &a); err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list agents: %w", err)
	}
	if out == nil {
		out = []registry.Agent{}
	}
	return out, nil
}

// UpdateAgent implements [registry.Store.UpdateAgent]: it reads the agent
// stored under name, calls fn with it (nil when there is none) and writes
// what fn returns — a non-nil agent is stored under name, nil deletes the
// record — and returns once that write is fsync'd to disk.
//
// The write is queued for the store's committer goroutine, which applies
// every queued write in one fsync'd transaction (a group commit), so
// concurrent writers share the cost of durability. fn therefore runs on the
// committer goroutine, inside the write transaction: it must be quick, and
// it must not call UpdateAgent (that would wait for itself). This store
// calls fn once per UpdateAgent call. Writes to the same name are applied
// in the order they were queued, each fn seeing the result of the one
// before.
//
// Each write is isolated: if fn returns an error, UpdateAgent returns that
// error unchanged and nothing is written for this call, while the other
// writes in the same transaction still commit. A panic in fn is recovered
// and returned as an error, with nothing written.
//
// If ctx is done before the committer takes the write, UpdateAgent returns
// ctx's error and nothing is written; once taken, it waits for the commit
// and reports its outcome. After [Store.Close] it returns an error wrapping
// [ErrClosed].
func (s *Store) UpdateAgent(ctx context.Context, name string, fn func(cur *registry.Agent) (*registry.Agent, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch {
	case fn == nil:
		return fmt.Errorf("boltstore: update agent %q: nil function", name)
	case name == "":
		return errors.New("boltstore: update agent: empty name")
	case len(name) > bbolt.MaxKeySize:
		return fmt.Errorf("boltstore: update agent: name is %d bytes, more than %d", len(name), bbolt.MaxKeySize)
	}
	return s.submit(ctx, &request{
		op:    fmt.Sprintf("update agent %q", name),
		apply: func(tx *bbolt.Tx) error { return applyAgent(tx, name, fn) },
	})
}

// Close stops the committer, fails the writes still queued with
// [ErrClosed], and closes the file, releasing its lock. A write that was
// already being committed completes first. Close waits for all of this; it
// is idempotent and safe for concurrent use, and later calls return the
// first call's result.
func (s *Store) Close() error {
	if s.db == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		s.mu.Unlock()
		close(s.quit)
		<-s.done
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("boltstore: close %s: %w", s.path, err)
		}
		s.log.Info("boltstore: closed", "path", s.path, "commits", s.commits.Load(), "writes", s.writes.Load())
	})
	return s.closeErr
}

// view runs fn in a read-only transaction. A fault or panic while reading
// the memory-mapped file (which only a damaged file causes) becomes an
// error wrapping ErrCorrupt instead of crashing the process.
func (s *Store) view(fn func(tx *bbolt.Tx) error) (err error) {
	if s.db == nil || s.closed.Load() {
		return ErrClosed
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: read failed: %v", ErrCorrupt, p)
		}
	}()
	err = s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// decodeAgent decodes the stored record v of name into a.
func decodeAgent(name string, v []byte, a *registry.Agent) error {
	if err := json.Unmarshal(v, a); err != nil {
		return fmt.Errorf("%w: record of agent %q: %w", ErrCorrupt, name, err)
	}
	return nil
}
