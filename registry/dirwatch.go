package registry

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Defaults of [WatchOptions].
const (
	DefaultPollInterval = time.Second
	DefaultSettle       = 500 * time.Millisecond
)

// WatchOptions configures a [DirWatcher]. A nil *WatchOptions means all
// defaults. Agents are validated with the registry's endpoint policy.
type WatchOptions struct {
	// LookupEnv looks up environment variables for ${NAME} references.
	// Nil means os.LookupEnv.
	LookupEnv func(name string) (value string, ok bool)

	// RequireDefault requires exactly one default agent in the directory
	// (see [DirOptions]).
	RequireDefault bool

	// PollInterval is how often the directory's file list, sizes and
	// modification times are checked. Zero means [DefaultPollInterval]; a
	// negative value disables polling ([DirWatcher.Reload] still works).
	PollInterval time.Duration

	// Settle is how long the directory must stay unchanged before a change
	// is loaded, so that several writes within it cause one reload. Zero
	// or negative means [DefaultSettle].
	Settle time.Duration

	// Logger receives reloads made on file changes and their failures.
	// Nil means discard.
	Logger *slog.Logger

	// OnReload, if set, is called after every reload the watcher starts
	// itself on a file change, with its report and error. It runs on the
	// watcher's goroutine, outside its locks, and must not call Close.
	OnReload func(ReloadReport, error)
}

// ReloadReport is the outcome of reloading an agent directory: what
// changed on success, every problem on failure.
type ReloadReport struct {
	// Dir is the agent directory.
	Dir string `json:"dir"`
	FileAgentsReport
	// Problems lists every problem of a failed load, with file and line
	// where known. The previous agents stay in service.
	Problems []Problem `json:"problems,omitempty"`
}

// DirWatcher keeps a registry's file agents equal to a YAML agent
// directory: it loads the directory with [LoadDir] and applies
// it with [Registry.ReplaceFileAgents] when the files change (polling,
// coalesced), and when [DirWatcher.Reload] is called (SIGHUP, POST
// /v1/admin/reload). A reload is all-or-nothing: on any problem the
// previous agents stay in service and the error is kept for
// [DirWatcher.LastError].
//
// Polling compares the agent files' paths, sizes and modification times, so
// a rewrite that keeps both size and modification time (within the file
// system's timestamp granularity) is not seen; Reload always reads the
// files.
//
// Create one with [NewDirWatcher]; the zero value is not usable. A
// DirWatcher is safe for concurrent use; reloads are serialised. Its
// polling goroutine runs until [DirWatcher.Close].
type DirWatcher struct {
	reg      *Registry
	dir      string
	load     DirOptions
	interval time.Duration
	settle   time.Duration
	log      *slog.Logger
	onReload func(ReloadReport, error)
	seed     maphash.Seed

	mu      sync.Mutex // serialises reloads; guards applied, failed
	applied uint64     // fingerprint of the directory last applied
	failed  uint64     // fingerprint of the directory whose load last failed, or 0
	closed  bool

	errMu   sync.Mutex
	lastErr error

	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

// NewDirWatcher loads dir into reg and, unless opts.PollInterval is
// negative, starts watching it. A directory that does not load is an error
// (a *[DirError] listing every problem): nothing is applied and no
// goroutine is started.
func NewDirWatcher(ctx context.Context, reg *Registry, dir string, opts *WatchOptions) (*DirWatcher, error) {
	if reg == nil {
		return nil, errors.New("registry: NewDirWatcher: nil Registry")
	}
	var o WatchOptions
	if opts != nil {
		o = *opts
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &DirWatcher{
		reg:      reg,
		dir:      dir,
		load:     DirOptions{Policy: reg.policy, LookupEnv: o.LookupEnv, RequireDefault: o.RequireDefault},
		interval: o.PollInterval,
		settle:   o.Settle,
		log:      o.Logger,
		onReload: o.OnReload,
		seed:     maphash.MakeSeed(),
	}
	rep, err := w.Reload(ctx)
	if err != nil {
		return nil, err
	}
	w.log.Info("agent directory loaded", "dir", dir, "agents", len(rep.Added)+len(rep.Replaced)+len(rep.Unchanged),
		"added", len(rep.Added), "replaced", len(rep.Replaced), "removed", len(rep.Removed))
	if w.interval > 0 {
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		go w.watch()
	}
	return w, nil
}

// Reload loads the directory and applies it now, whether or not it
// changed. On failure the previous agents stay in service, the report
// lists every problem and the error is a *[DirError] (or the store's
// error). After Close it returns [ErrClosed].
func (w *DirWatcher) Reload(ctx context.Context) (ReloadReport, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ReloadReport{Dir: w.dir}, ErrClosed
	}
	return w.reloadLocked(ctx, w.fingerprint())
}

// LastError returns the error of the last reload, or nil if it succeeded.
func (w *DirWatcher) LastError() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.lastErr
}

// Close stops watching and waits for the polling goroutine to exit. It is
// idempotent and safe for concurrent use; it does not change the registry.
func (w *DirWatcher) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		if w.stop != nil {
			close(w.stop)
			<-w.done
		}
	})
	return nil
}

// reloadLocked loads and applies the directory, whose fingerprint before
// loading was fp. The caller holds w.mu.
func (w *DirWatcher) reloadLocked(ctx context.Context, fp uint64) (ReloadReport, error) {
	rep := ReloadReport{Dir: w.dir}
	agents, err := LoadDir(w.dir, &w.load)
	if err == nil {
		rep.FileAgentsReport, err = w.reg.ReplaceFileAgents(ctx, agents)
	}
	var de *DirError
	switch {
	case errors.As(err, &de):
		rep.Problems = de.Problems
		w.failed = fp // retried once the files change
	case err != nil:
		w.failed = 0 // a store failure: retried on the next poll
	default:
		w.applied, w.failed = fp, 0
	}
	w.errMu.Lock()
	w.lastErr = err
	w.errMu.Unlock()
	return rep, err
}

// watch polls the directory until Close. A change is loaded once the
// directory has stayed the same for the settle time.
func (w *DirWatcher) watch() {
	defer close(w.done)
	poll := time.NewTicker(w.interval)
	defer poll.Stop()
	settle := time.NewTimer(time.Hour)
	settle.Stop() // armed by the first change
	seen := w.fingerprint()
	pending := false
	for {
		select {
		case <-w.stop:
			settle.Stop()
			return
		case <-poll.C:
			fp := w.fingerprint()
			if fp != seen || !pending && w.needsReload(fp) {
				seen, pending = fp, true
				settle.Reset(w.settle)
			}
		case <-settle.C:
			fp := w.fingerprint()
			if fp != seen { // still changing: wait until it settles
				seen = fp
				settle.Reset(w.settle)
				continue
			}
			pending = false
			w.reloadOnChange(fp)
		}
	}
}

// needsReload reports whether the directory with fingerprint fp differs
// from what was last applied and did not already fail to load as it is.
func (w *DirWatcher) needsReload(fp uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.closed && fp != w.applied && fp != w.failed
}

func (w *DirWatcher) reloadOnChange(fp uint64) {
	w.mu.Lock()
	if w.closed || fp == w.applied || fp == w.failed {
		w.mu.Unlock()
		return
	}
	rep, err := w.reloadLocked(context.Background(), fp)
	w.mu.Unlock()
	switch {
	case err != nil:
		problems := make([]string, len(rep.Problems))
		for i, p := range rep.Problems {
			problems[i] = p.String()
		}
		w.log.Error("agent directory reload failed; the previous agents stay in service",
			"dir", w.dir, "err", err, "problems", problems)
	case rep.Changed():
		w.log.Info("agent directory reloaded", "dir", w.dir, "added", rep.Added, "replaced", rep.Replaced,
			"removed", rep.Removed, "unchanged", len(rep.Unchanged))
	}
	if w.onReload != nil {
		w.onReload(rep, err)
	}
}

// fingerprint hashes what polling compares: the agent files' paths, sizes
// and modification times, and the walk's own problems.
func (w *DirWatcher) fingerprint() uint64 {
	files, probs := scanDir(w.dir)
	var h maphash.Hash
	h.SetSeed(w.seed)
	for _, f := range files {
		h.WriteString(f.rel)
		h.WriteByte(0)
		h.WriteString(strconv.FormatInt(f.info.Size(), 10))
		h.WriteByte(0)
		h.WriteString(strconv.FormatInt(f.info.ModTime().UnixNano(), 10))
		h.WriteByte('\n')
	}
	for _, p := range probs {
		h.WriteString(p.String())
		h.WriteByte('\n')
	}
	return h.Sum64() | 1 // never 0, which means "none"
}
