package discovery

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/registry"
)

// Options configure an [Engine]. A nil *Options, and the zero value of every
// field, mean the documented default.
type Options struct {
	// Now returns the current time. Search uses it to leave out agents whose
	// TTL has lapsed (registry.Agent.StaleAt): staleness is driven by time,
	// and no event announces it. Nil means time.Now.
	Now func() time.Time

	// Available reports whether an agent can take work, typically that its
	// circuit breaker is not open. Search leaves out agents for which it
	// returns false unless Query.IncludeUnavailable is set. Nil means every
	// agent is available.
	//
	// Available is called without any Engine lock held, possibly from
	// several goroutines at once, and at most once per agent and search; it
	// must be fast and may call the Engine.
	Available func(name string) bool
}

// Engine ranks agents for a text query from an in-memory inverted index
// (how ranking works for users: docs/API.md#discovery).
//
// Feed it agents directly with [Engine.Put] and [Engine.Remove] (no
// registry or store needed), or keep it current from a registry with
// [Engine.Follow]. Queries touch only the postings of their terms and keep
// the best results in a heap; they never scan all agents.
//
// The zero Engine is an empty engine with default options, ready to use.
// An Engine is safe for concurrent use: searches run in parallel with each
// other and are serialised only with updates, which take microseconds.
type Engine struct {
	now       func() time.Time
	available func(name string) bool
	params    scoring
	text      textOptions

	mu sync.RWMutex
	ix *index // nil until the first update

	// The changes Follow has received and not yet indexed, in commit
	// order (see Follow). applyMu serialises the goroutines that index
	// them (the follow loop, a search catching up), so that batches are
	// indexed in the order they were taken; it is taken before mu.
	applyMu sync.Mutex
	queueMu sync.Mutex
	queue   []registry.Event
	// unapplied counts the changes queued and not yet in the index: those
	// in queue and those of the batch being indexed. Read without a lock
	// by searches, it is decremented only once a batch is indexed.
	unapplied atomic.Int64
}

// New returns an empty Engine configured by opts (nil means defaults).
func New(opts *Options) *Engine {
	e := &Engine{}
	if opts != nil {
		e.now = opts.Now
		e.available = opts.Available
	}
	return e
}

func (e *Engine) scoring() *scoring {
	if e.params.k1 == 0 {
		return &defaultScoring
	}
	return &e.params
}

func (e *Engine) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// index returns the index, creating it. e.mu must be held for writing.
func (e *Engine) index() *index {
	if e.ix == nil {
		e.ix = newIndex(e.scoring())
	}
	return e.ix
}

// Put indexes a, replacing any agent of the same name. The engine keeps a
// copy of a without its auth token (registry.Agent.Redacted); later changes
// to a do not affect it.
//
// When the indexed content (name, displayName, capabilities, description,
// examples) is unchanged, Put only replaces the stored record, so a
// heartbeat costs no re-indexing. Any string is accepted as a name: the
// engine does not validate agents.
func (e *Engine) Put(a registry.Agent) {
	a = a.Redacted()
	own := agentWords(&a, &e.text)
	e.catchUp() // what Follow queued is older
	e.mu.Lock()
	defer e.mu.Unlock()
	e.putLocked(a, own)
}

// putLocked is Put of the redacted a, whose own words are own. e.mu must
// be held for writing.
func (e *Engine) putLocked(a registry.Agent, own []string) {
	ix := e.index()
	if id, ok := ix.docIDs[a.Name]; ok {
		if d := &ix.docs[id]; sameContent(&d.agent, &a) {
			seg := d.seg
			*d = makeDoc(a)
			d.seg = seg
			ix.ttl[id] = a.TTLSeconds > 0
			return
		}
	}
	an := analyze(&a, own, ix.knownWord, &e.text)
	ix.put(a, own, &an, &e.text)
}

// Remove deletes the agent named name and reports whether it was indexed.
func (e *Engine) Remove(name string) bool {
	e.catchUp() // what Follow queued is older
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ix == nil {
		return false
	}
	return e.ix.remove(name, &e.text)
}

// Reset replaces the engine's content with agents, as one update: searches
// see either the old set or the new one. When names repeat, the last agent
// wins.
//
// Reset analyses the whole set before indexing it, so the segmentation of
// concatenated names ("airqualityforecast") uses the vocabulary of every
// agent in the set; agents added later with Put are segmented against the
// vocabulary indexed at that time.
func (e *Engine) Reset(agents []registry.Agent) { e.reset(agents, false) }

// reset is Reset; shared says the records are a registry's, which it never
// modifies: the index then shares their slices and maps instead of
// copying them.
func (e *Engine) reset(agents []registry.Agent, shared bool) {
	ix := newIndex(e.scoring())
	ix.bulk = true
	// The vocabulary first, so that every name is segmented against all
	// the words of the set.
	vocab := make(map[string]bool)
	for i := range agents {
		for _, w := range agentWords(&agents[i], &e.text) {
			vocab[w] = true
		}
	}
	known := func(w string) bool { return vocab[w] }
	for _, a := range agents {
		if shared {
			a = a.RedactedView()
		} else {
			a = a.Redacted()
		}
		own := agentWords(&a, &e.text)
		an := analyze(&a, own, known, &e.text)
		ix.put(a, own, &an, &e.text)
	}
	ix.bulk = false
	ix.recomputeBounds()
	ix.compact()
	e.catchUp() // what Follow queued is older: replaced too
	e.mu.Lock()
	e.ix = ix
	e.mu.Unlock()
}

// Apply updates the index with a registry change event: EventPut and
// EventHeartbeat put ev.Agent (a heartbeat only refreshes the stored record),
// EventDelete removes it. Other event types are ignored.
func (e *Engine) Apply(ev registry.Event) {
	switch ev.Type {
	case registry.EventPut, registry.EventHeartbeat:
		e.Put(ev.Agent)
	case registry.EventDelete:
		e.Remove(ev.Agent.Name)
	}
}

// Len returns the number of indexed agents.
func (e *Engine) Len() int {
	e.catchUp()
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.ix == nil {
		return 0
	}
	return e.ix.nDocs
}

// Searcher ranks agents for a query: *Engine implements it, and so do
// wrappers that time or forward searches. The front-ends and the
// delegation client take one.
type Searcher interface {
	Search(query string, q *Query) ([]Result, error)
}

// JSONSearcher is a [Searcher] that also encodes its results itself,
// faster than json.Marshal of them and with the same bytes: *Engine
// implements it ([Engine.AppendSearchJSON]), and the HTTP and MCP
// discovery paths use it when their Searcher has it.
type JSONSearcher interface {
	Searcher
	AppendSearchJSON(dst []byte, query string, q *Query) ([]byte, error)
}

var _ JSONSearcher = (*Engine)(nil)

// A JSONTextSearcher also writes the text copy of its JSON
// ([Engine.AppendSearchJSONText]): what an MCP tool result gives besides
// its structured content.
type JSONTextSearcher interface {
	JSONSearcher
	AppendSearchJSONText(dst, text []byte, query string, q *Query) ([]byte, []byte, error)
}

var _ JSONTextSearcher = (*Engine)(nil)

// Follow makes the engine mirror src: it replaces the engine's content with
// src's current agents (as [Engine.Reset] does) and applies every later
// change event, until stop is called. stop is idempotent and safe for
// concurrent use; after it returns, no more events are applied.
//
// Events that arrive while the snapshot is being indexed are queued and
// applied after it, in order, so none is lost or applied out of order.
//
// src calls the engine back on its write path (a registration waits for
// its subscribers), so Follow keeps indexing off that path: the callback
// only queues the change, and a goroutine Follow starts (stop ends it)
// indexes what is queued, in batches. Reads stay consistent with src all
// the same: a search (and Len) first indexes whatever is still queued, so
// a change src has acknowledged to its writer — delivered to its
// subscribers before the write returns, as *registry.Registry does — is
// visible to every search that starts after it.
func (e *Engine) Follow(src registry.Subscriber) (stop func()) {
	wake, quit, done := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go e.applyLoop(wake, quit, done)
	unsubscribe, _ := registry.Follow(src, func(snapshot []registry.Agent) error {
		e.reset(snapshot, true)
		return nil
	}, func(ev registry.Event) {
		e.enqueue(ev)
		select {
		case wake <- struct{}{}:
		default: // already awake
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			unsubscribe()
			close(quit)
			<-done
		})
	}
}

// applyLoop indexes the queued changes each time Follow wakes it, until
// quit is closed; it then indexes what is left and closes done.
func (e *Engine) applyLoop(wake, quit, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-wake:
			e.catchUp()
		case <-quit:
			e.catchUp()
			return
		}
	}
}

// enqueue queues a change for the follow loop.
func (e *Engine) enqueue(ev registry.Event) {
	e.queueMu.Lock()
	e.queue = append(e.queue, ev)
	e.unapplied.Add(1)
	e.queueMu.Unlock()
}

// maxBatch bounds the changes catchUp indexes under one hold of the write
// lock, so that searches are not held up behind a long burst.
const maxBatch = 256

// catchUp indexes every change queued so far, oldest first. When it
// returns, each change queued before the call is in the index. With
// nothing queued it costs one atomic load.
func (e *Engine) catchUp() {
	if e.unapplied.Load() == 0 {
		return
	}
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	for {
		e.queueMu.Lock()
		batch := e.queue
		if len(batch) > maxBatch {
			batch = batch[:maxBatch:maxBatch]
			e.queue = e.queue[maxBatch:]
		} else {
			e.queue = nil
		}
		e.queueMu.Unlock()
		if len(batch) == 0 {
			return
		}
		e.applyBatch(batch)
		e.unapplied.Add(-int64(len(batch)))
	}
}

// applyBatch indexes batch, in order, under one hold of the write lock.
// The parts of an update that do not read the index (redaction, the
// agent's own words) are made before taking it.
func (e *Engine) applyBatch(batch []registry.Event) {
	puts := make([]pendingPut, len(batch))
	for i := range batch {
		ev := &batch[i]
		if ev.Type == registry.EventPut || ev.Type == registry.EventHeartbeat {
			// The registry never modifies an event's record: share its
			// slices and maps instead of copying them (Put, whose caller
			// may, copies).
			a := ev.Agent.RedactedView()
			puts[i] = pendingPut{agent: a, own: agentWords(&a, &e.text)}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range batch {
		switch batch[i].Type {
		case registry.EventPut, registry.EventHeartbeat:
			e.putLocked(puts[i].agent, puts[i].own)
		case registry.EventDelete:
			if e.ix != nil {
				e.ix.remove(batch[i].Agent.Name, &e.text)
			}
		}
	}
}

// pendingPut is the part of a Put made before taking the write lock.
type pendingPut struct {
	agent registry.Agent // redacted
	own   []string
}
