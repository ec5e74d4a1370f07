package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The buckets of the file. Every bucket of the layout is created when a
// store is created (and when an older store is opened), so the layout is
// stable before the packages that use the later buckets exist.
var (
	bucketAgents         = []byte("agents")
	bucketMeta           = []byte("meta")
	bucketDelegations    = []byte("delegations")
	bucketSessions       = []byte("sessions")
	bucketSessionsByUser = []byte("sessions_by_user")
	bucketBreakers       = []byte("breakers")
	bucketAudit          = []byte("audit")
)

// keySchemaVersion is the key, in the meta bucket, of the schema version:
// a decimal number.
var keySchemaVersion = []byte("schema_version")

// SchemaVersion is the version of the file layout this build writes. Open
// migrates stores with an older version forward and refuses newer ones with
// [ErrSchemaTooNew].
const SchemaVersion = 1

// schema is a file layout: its version, its buckets and the migrations that
// bring an older store up to it. Open uses currentSchema; tests open with
// other schemas to exercise migration.
type schema struct {
	version uint64
	buckets [][]byte
	// nested lists, by top-level bucket, the buckets created inside it.
	nested map[string][][]byte
	// migrations[v] upgrades a store at version v to version v+1, inside
	// the transaction that then records the new version. A store at
	// version v < version needs migrations v, v+1, …, version-1.
	migrations map[uint64]func(tx *bbolt.Tx) error
}

// currentSchema returns the layout of SchemaVersion.
func currentSchema() schema {
	return schema{
		version: SchemaVersion,
		buckets: [][]byte{
			bucketMeta, bucketAgents, bucketDelegations, bucketSessions,
			bucketSessionsByUser, bucketBreakers, bucketAudit,
		},
		// Nested buckets can be added to a version without a migration:
		// Open creates the missing ones, and a store whose parent bucket
		// was empty (every store, before the feature existed) is then the
		// same as a new one.
		nested: map[string][][]byte{
			string(bucketDelegations): delegationBucketNames,
			string(bucketSessions):    sessionBucketNames,
			string(bucketAudit):       auditBucketNames,
		},
		// Version 1 is the first: nothing to migrate from yet. A change of
		// layout adds an entry here and bumps SchemaVersion.
		migrations: map[uint64]func(tx *bbolt.Tx) error{},
	}
}

// Open opens the store in the bbolt file at path, creating the file (mode
// 0600) and any missing parent directories (mode 0700) when it does not
// exist. A nil opts means the defaults.
//
// An existing file is checked before use: its bbolt structure (every page
// reachable, no truncation) and its schema version. Open never resets or
// repairs a file. Its errors wrap:
//   - [ErrLocked] when another process holds the file beyond opts.Timeout;
//   - [ErrCorrupt] for a damaged, truncated or non-bbolt file;
//   - [ErrNotStore] for a zero-length file, a directory, or a bbolt file
//     that is not an agentmesh store;
//   - [ErrSchemaTooNew] for a store written by a newer build;
//   - the operating system's error otherwise (permissions, say).
//
// A store with an older schema version is migrated forward in one
// transaction.
//
// The returned Store owns a committer goroutine; call [Store.Close] to
// stop it and release the file.
func Open(path string, opts *Options) (*Store, error) {
	return open(path, opts, currentSchema())
}

func open(path string, opts *Options, sc schema) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if path == "" {
		return nil, errors.New("boltstore: open: empty path")
	}

	if err := mkdirAll(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("boltstore: open %s: create directory: %w", path, err)
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := create(path, sc, o.Timeout); err != nil {
			return nil, err
		}
		o.Logger.Info("boltstore: created", "path", path, "schema", sc.version)
	case err != nil:
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("boltstore: open %s: %w: not a regular file", path, ErrNotStore)
	case info.Size() == 0:
		return nil, fmt.Errorf("boltstore: open %s: %w: the file is empty (zero bytes); remove it to start a new store", path, ErrNotStore)
	}

	if err := check(path, o.Timeout); err != nil {
		return nil, err
	}

	var f *os.File
	db, err := openDB(path, &bbolt.Options{Timeout: o.Timeout, OpenFile: capture(&f)}, &f)
	if err != nil {
		return nil, err
	}
	from, err := prepare(db, sc)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	if from != sc.version {
		o.Logger.Info("boltstore: migrated", "path", path, "from", from, "to", sc.version)
	}
	o.Logger.Info("boltstore: opened", "path", path, "schema", sc.version)

	s := &Store{
		db:   db,
		path: path,
		log:  o.Logger,
		wake: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go s.run()
	return s, nil
}

// capture returns a bbolt OpenFile hook that records the opened file in
// *f, so that a panic inside bbolt.Open can still close it and release
// its lock.
func capture(f **os.File) func(string, int, os.FileMode) (*os.File, error) {
	return func(name string, flag int, perm os.FileMode) (*os.File, error) {
		file, err := os.OpenFile(name, flag, perm)
		*f = file
		return file, err
	}
}

// openDB calls bbolt.Open and classifies its errors. bbolt reads the file
// through a memory map and may fault or panic on a damaged file; that
// becomes an error wrapping ErrCorrupt, and the file bbolt opened (*f, set
// by the capture hook in bo) is closed so its lock is released. The
// mapping of such a file is not unmapped: bbolt keeps it unexported.
func openDB(path string, bo *bbolt.Options, f **os.File) (db *bbolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if *f != nil {
				_ = (*f).Close()
			}
			db, err = nil, fmt.Errorf("boltstore: open %s: %w: %v", path, ErrCorrupt, p)
		}
	}()
	db, err = bbolt.Open(path, 0o600, bo)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("boltstore: open %s: %w (waited %v)", path, ErrLocked, bo.Timeout)
	case isOSError(err):
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	default:
		// Invalid meta pages, a checksum or version mismatch, a file too
		// small for its page size: bbolt cannot read it.
		return nil, fmt.Errorf("boltstore: open %s: %w: %w", path, ErrCorrupt, err)
	}
}

// isOSError reports whether err came from the operating system (opening,
// locking or mapping the file) rather than from bbolt reading it.
func isOSError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// check opens the file read-only and verifies its bbolt structure before
// the store opens it for writing: the file must be as long as its meta
// page says, every page of every bucket must be readable, and bbolt's
// consistency check must pass. A fault or panic while doing so (reading a
// damaged file) is reported as ErrCorrupt instead of crashing.
func check(path string, timeout time.Duration) error {
	var f *os.File
	db, err := openDB(path, &bbolt.Options{
		Timeout:         timeout,
		ReadOnly:        true,
		PreLoadFreelist: true, // read the freelist here, where a fault is recovered
		OpenFile:        capture(&f),
	}, &f)
	if err != nil {
		return err
	}
	defer db.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	if err := verify(db, info.Size()); err != nil {
		return fmt.Errorf("boltstore: open %s: %w: %w", path, ErrCorrupt, err)
	}
	return nil
}

// verify checks the structure of db, whose file is size bytes long.
func verify(db *bbolt.DB, size int64) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reading the file failed: %v", p)
		}
	}()
	return db.View(func(tx *bbolt.Tx) error {
		if need := tx.Size(); need > size {
			return fmt.Errorf("the file is truncated: %d bytes, the database needs %d", size, need)
		}
		// Touch every page in this goroutine, where a fault is recovered,
		// before bbolt's own check walks them on a goroutine of its own.
		if err := tx.ForEach(func(_ []byte, b *bbolt.Bucket) error { return touch(b) }); err != nil {
			return err
		}
		var errs []error
		for err := range tx.Check() {
			if len(errs) < 5 {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("consistency check failed: %w", errors.Join(errs...))
		}
		return nil
	})
}

// touch reads the first and last byte of every value in b and its nested
// buckets, which maps in every page they live on.
func touch(b *bbolt.Bucket) error {
	var sink byte
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if child := b.Bucket(k); child != nil {
				if err := touch(child); err != nil {
					return err
				}
			}
			continue
		}
		if len(v) > 0 {
			sink ^= v[0] ^ v[len(v)-1]
		}
	}
	_ = sink
	return nil
}

// prepare checks the schema version of db and brings the store up to sc:
// it runs the migrations from the stored version, creates any missing
// bucket of the layout and records the version, all in one transaction. It
// returns the version the store had.
func prepare(db *bbolt.DB, sc schema) (from uint64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	err = db.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: a bbolt database without the %q bucket", ErrNotStore, bucketMeta)
		}
		raw := meta.Get(keySchemaVersion)
		v, perr := strconv.ParseUint(string(raw), 10, 64)
		switch {
		case raw == nil:
			return fmt.Errorf("%w: no schema version", ErrCorrupt)
		case perr != nil || v == 0:
			return fmt.Errorf("%w: invalid schema version %q", ErrCorrupt, raw)
		case v > sc.version:
			return fmt.Errorf("%w: the store has schema version %d, this build knows versions up to %d; use a newer agentmesh", ErrSchemaTooNew, v, sc.version)
		}
		from = v
		for ; v < sc.version; v++ {
			m, ok := sc.migrations[v]
			if !ok {
				return fmt.Errorf("boltstore: no migration from schema version %d", v)
			}
			if err := m(tx); err != nil {
				return fmt.Errorf("boltstore: migrate schema %d to %d: %w", v, v+1, err)
			}
		}
		return layout(tx, sc)
	})
	return from, err
}

// layout creates every bucket of sc that tx lacks and records sc.version.
func layout(tx *bbolt.Tx, sc schema) error {
	for _, name := range sc.buckets {
		b, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return fmt.Errorf("%w: bucket %q: %w", ErrCorrupt, name, err)
		}
		for _, child := range sc.nested[string(name)] {
			if _, err := b.CreateBucketIfNotExists(child); err != nil {
				return fmt.Errorf("%w: bucket %q in %q: %w", ErrCorrupt, child, name, err)
			}
		}
	}
	return tx.Bucket(bucketMeta).Put(keySchemaVersion, strconv.AppendUint(nil, sc.version, 10))
}

// create makes a new store at path without ever exposing a partial file
// there: it builds the store in a temporary file in the same directory,
// fsyncs it, hard-links it to path (which fails if path appeared
// meanwhile, so another process's new store is never replaced) and fsyncs
// the directory. A crash at any point leaves either no file at path or a
// complete store, at worst plus a stray temporary file.
func create(path string, sc schema, timeout time.Duration) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".new-*")
	if err != nil {
		return fmt.Errorf("boltstore: create %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("boltstore: create %s: %w", path, err)
	}
	db, err := bbolt.Open(name, 0o600, &bbolt.Options{Timeout: timeout})
	if err != nil {
		return fmt.Errorf("boltstore: create %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error { // commits with fsync
		if _, err := tx.CreateBucket(bucketMeta); err != nil {
			return err
		}
		return layout(tx, sc)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("boltstore: create %s: %w", path, err)
	}
	if err := os.Link(name, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // created concurrently by someone else: open theirs
		}
		return fmt.Errorf("boltstore: create %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("boltstore: create %s: %w", path, err)
	}
	return nil
}

// mkdirAll creates dir and its missing parents with mode 0700 and fsyncs
// the parent of each directory it created, so the new entries survive a
// crash.
func mkdirAll(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := syncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs directory dir, making entries created in it durable.
// Windows cannot fsync a directory; there it does nothing.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
