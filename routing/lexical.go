package routing

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/internal/textnorm"
	"github.com/agentmesh/agentmesh/registry"
)

// Defaults of [LexicalOptions].
const (
	// DefaultAmbiguityRatio: a classification is ambiguous when the
	// runner-up's score is at least this fraction of the top agent's.
	DefaultAmbiguityRatio = 0.9
	// DefaultCandidates is how many candidates a Classification lists.
	DefaultCandidates = 3
	// DefaultDebounce is how long the background trainer waits for more
	// registry changes before it retrains.
	DefaultDebounce = 200 * time.Millisecond
	// DefaultReadyWait is how long Classify waits for the first model.
	DefaultReadyWait = 5 * time.Second
)

// LexicalOptions configure a [Lexical] classifier. A nil *LexicalOptions,
// and the zero value of every field, mean the documented default.
type LexicalOptions struct {
	// Now returns the current time; stale agents (registry.Agent.StaleAt)
	// are never picked. Nil means time.Now.
	Now func() time.Time

	// AmbiguityRatio sets when a classification is Ambiguous: the
	// runner-up's score is at least AmbiguityRatio × the top agent's.
	// Zero means [DefaultAmbiguityRatio]; a value ≥ 1 (or negative)
	// never flags ambiguity.
	AmbiguityRatio float64

	// Candidates is how many agents a Classification lists in Candidates.
	// Zero means [DefaultCandidates]; negative lists none.
	Candidates int

	// Debounce is how long, after a registry change, the background
	// trainer waits for further changes before retraining, so a burst of
	// changes (a reload of the agent directory) costs one training. Zero
	// means [DefaultDebounce]; negative means no wait.
	Debounce time.Duration

	// ReadyWait is how long Classify waits for the first model when the
	// classifier has agents it has not learned yet (the first
	// registrations, the agent directory loading): it trains at once,
	// without the debounce, and answers from the model when it is ready,
	// or fails with [ErrNotReady] after ReadyWait. Once there is a model,
	// it serves until the next one replaces it, and Classify never waits.
	// Zero means [DefaultReadyWait]; negative means no wait.
	ReadyWait time.Duration

	// Logger receives training events (Debug) and training failures
	// (Error). Nil means discard.
	Logger *slog.Logger
}

// Lexical is the built-in "lexical" classifier. It learns, with
// no network and no model files, from each agent's examples, capabilities,
// description and display name: a softmax regression over stemmed words,
// word pairs and character n-grams, with a calibrated confidence.
//
// Give it agents with [Lexical.Reset], which trains at once, or keep it
// current from a registry with [Lexical.Follow]: registry changes are then
// learned in the background while Classify keeps answering from the
// previous model, which is swapped for the new one atomically. Bursts of
// changes are coalesced into one training. Removals and staleness (TTL)
// take effect at once, without retraining. A classifier that is not in
// use — no Classify since its last training, as in a mesh that only
// discovers and delegates — does not retrain on changes: the next
// Classify starts the training, and waits for it when the last one took
// less than a quarter of a second (a small registry: "register, then
// route" sees the new agent), else answers from the previous model.
// The same holds for the first model of agents registered after Follow
// began: the first Classify trains it and waits for it (ReadyWait), so a
// mesh that is filled and never routes never holds a model of them.
//
// Registries of 512 agents or more get a sparse model, whose weights are
// on each agent's own words only: its memory and the cost of a message
// grow with the registry's text, not with words × agents (about 14 MB and
// a quarter of a millisecond for 10,000 agents × 5 examples). A smaller
// registry whose dense model would hold more than 8 M weights (32 MiB)
// gets the sparse model too.
//
// The default agent (IsDefault) is learned only from its examples; when it
// has some, it competes with the other agents as "none of them", and a
// message that looks like its examples is classified as the default agent
// (which the gate routes to). Without examples it is never picked, except
// when there is no other agent.
//
// The zero Lexical is an empty classifier with default options: Classify
// returns [ErrNoAgents] until it is given agents. A Lexical is safe for
// concurrent use. A Lexical that follows a registry owns a goroutine:
// call [Lexical.Close] to stop it.
type Lexical struct {
	opts   LexicalOptions
	params *lexParams // nil means defaultParams
	// onTrain, when set (by tests), is called by every training after it
	// took its snapshot of the agents and before it builds the model.
	onTrain func()

	model   atomic.Pointer[lexModel]
	scratch sync.Pool // *classifyScratch
	// used is set by Classify and cleared when a training takes its
	// snapshot: a change is learned at once only by a classifier in use.
	used atomic.Bool
	// behind is set while the model misses a change (gen > trainedGen).
	behind atomic.Bool

	// trainMu serialises trainings.
	trainMu sync.Mutex

	mu         sync.Mutex
	agents     map[string]lexAgent
	gen        uint64 // bumped by every change that needs training
	trainedGen uint64 // gen of the last finished training
	trainErr   error  // error of that training, if it failed
	trained    chan struct{}
	kick       chan struct{}
	hurry      chan struct{} // ends the debounce: a Classify waits for the first model
	stop       chan struct{} // closed by Close
	done       chan struct{} // closed when the trainer goroutine exits
	cancels    []func()
	running    bool
	closed     bool
	// learnedOnce is set by the first training that succeeds: from then
	// on the classifier is Ready, though it may learn new agents.
	learnedOnce bool
	// wanted asks the trainer for a training whether or not the
	// classifier is in use (Sync, Classify catching up).
	wanted bool
}

// LexicalInfo describes the model a [Lexical] classifier answers with.
type LexicalInfo struct {
	// Agents is how many agents the model can pick (agents with at least
	// one word of text; the default agent counts when it has examples).
	Agents int
	// Texts is how many training texts it learned from.
	Texts int
	// Features is the size of its vocabulary.
	Features int
	// Default is the default agent's name, "" if none.
	Default string
	// TrainedAt and TrainDuration: when the model was built, in how long.
	TrainedAt     time.Time
	TrainDuration time.Duration
}

// NewLexical returns an empty classifier configured by opts (nil means
// defaults).
func NewLexical(opts *LexicalOptions) *Lexical {
	l := &Lexical{}
	if opts != nil {
		l.opts = *opts
	}
	return l
}

func (l *Lexical) p() *lexParams {
	if l.params != nil {
		return l.params
	}
	return &defaultParams
}

func (l *Lexical) now() time.Time {
	if l.opts.Now != nil {
		return l.opts.Now()
	}
	return time.Now()
}

func (l *Lexical) logger() *slog.Logger {
	if l.opts.Logger != nil {
		return l.opts.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// initLocked creates the maps and channels. l.mu must be held.
func (l *Lexical) initLocked() {
	if l.agents == nil {
		l.agents = make(map[string]lexAgent)
		l.trained = make(chan struct{})
		l.kick = make(chan struct{}, 1)
		l.hurry = make(chan struct{}, 1)
		l.stop = make(chan struct{})
		l.done = make(chan struct{})
	}
}

// putLocked stores a, keeping the live state the models share when the
// agent is known, and sets it from a. l.mu must be held.
func (l *Lexical) putLocked(next map[string]lexAgent, a *registry.Agent) (old lexAgent, ok bool) {
	old, ok = l.agents[a.Name]
	la := makeLexAgent(a)
	if la.live = old.live; la.live == nil {
		la.live = &agentLive{}
	}
	la.live.set(a)
	next[a.Name] = la
	return old, ok
}

// Info describes the current model; ok is false when there is none yet.
func (l *Lexical) Info() (info LexicalInfo, ok bool) {
	m := l.model.Load()
	if m == nil {
		return LexicalInfo{}, false
	}
	return m.info, true
}

// Reset replaces the classifier's agents with agents and trains a model on
// them before returning (a second or two for 15,000 examples). Classify
// answers from the previous model meanwhile. When names repeat, the last
// agent wins. If ctx ends first, Reset returns its error and the previous
// model stays; the new agents are then learned at the next training.
func (l *Lexical) Reset(ctx context.Context, agents []registry.Agent) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.initLocked()
	l.resetLocked(agents, false)
	l.mu.Unlock()
	return l.train(ctx)
}

// resetLocked replaces the agent set. shared says the records are a
// registry's, which it never modifies: they are kept as they are;
// otherwise (Reset's caller may reuse them) their slices are copied.
// l.mu must be held.
func (l *Lexical) resetLocked(agents []registry.Agent, shared bool) {
	next := make(map[string]lexAgent, len(agents))
	for _, a := range agents {
		if !shared {
			a.Capabilities, a.Examples = slices.Clone(a.Capabilities), slices.Clone(a.Examples)
		}
		l.putLocked(next, &a)
	}
	for name, la := range l.agents {
		if _, ok := next[name]; !ok {
			la.live.gone.Store(true)
		}
	}
	l.agents = next
	l.gen++
}

// Apply updates the classifier with a registry change: a removal or a
// heartbeat takes effect at once; a new agent, or a change to what the
// classifier learns from (examples, capabilities, description, display
// name, default flag), is learned by the next training, which Apply
// schedules in the background when the classifier follows a registry (see
// [Lexical.Follow]) and is in use, and otherwise leaves to the next
// Classify, [Lexical.Sync] or [Lexical.Retrain].
func (l *Lexical) Apply(ev registry.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.initLocked()
	a := &ev.Agent
	switch ev.Type {
	case registry.EventHeartbeat:
		if la, ok := l.agents[a.Name]; ok {
			la.live.set(a)
		}
		return
	case registry.EventPut:
		old, ok := l.putLocked(l.agents, a)
		if ok && old.sameText(a) {
			return
		}
	case registry.EventDelete:
		la, ok := l.agents[a.Name]
		if !ok {
			return
		}
		delete(l.agents, a.Name)
		la.live.gone.Store(true)
	default:
		return
	}
	l.gen++
	l.behind.Store(true)
	// A classifier that is not classifying (a discovery-only mesh) does
	// not retrain for every registration: the next Classify starts the
	// training. That holds for a first model too: readiness is the model
	// of the agents Follow started with, and a Classify waits for a first
	// model (ReadyWait).
	if l.running && l.used.Load() {
		l.kickLocked()
	}
}

// kickLocked wakes the background trainer. l.mu must be held.
func (l *Lexical) kickLocked() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// lexAgent is what a Lexical keeps of an agent between trainings: the
// fields its training texts come from (see agentTexts), sharing their
// strings and slices with the registry's record, which the registry never
// modifies, and its live state (TTL, last heartbeat, removal), which the
// models share. At 96 bytes it is stored in the map's own slots, where a
// copy of the whole registry.Agent took a separate 350-byte allocation per
// agent.
type lexAgent struct {
	displayName, description string
	capabilities, examples   []string
	live                     *agentLive
	isDefault                bool
}

func makeLexAgent(a *registry.Agent) lexAgent {
	return lexAgent{
		displayName:  a.DisplayName,
		description:  a.Description,
		capabilities: a.Capabilities,
		examples:     a.Examples,
		isDefault:    a.IsDefault,
	}
}

// record is the registry.Agent called name that training reads: the
// fields of la, nothing else.
func (la *lexAgent) record(name string) registry.Agent {
	return registry.Agent{
		Name:         name,
		DisplayName:  la.displayName,
		Description:  la.description,
		Capabilities: la.capabilities,
		Examples:     la.examples,
		IsDefault:    la.isDefault,
	}
}

// sameText reports whether la and a give the same training texts.
func (la *lexAgent) sameText(a *registry.Agent) bool {
	return la.isDefault == a.IsDefault && la.displayName == a.DisplayName &&
		la.description == a.Description && slices.Equal(la.capabilities, a.Capabilities) &&
		slices.Equal(la.examples, a.Examples)
}

// Retrain trains a model on the current agents, if they changed since the
// last training, and waits for it.
func (l *Lexical) Retrain(ctx context.Context) error {
	return l.train(ctx)
}

// Follow makes the classifier learn src's agents: it trains on src's
// current agents before returning (so Classify is ready when Follow
// returns, unless that training failed), then retrains in the background
// after every change, as [Lexical.Apply] describes. stop ends the
// following; it is idempotent. [Lexical.Close] also ends it, and stops the
// background trainer. Following a second source replaces the agents with
// its snapshot; the changes of both are then applied.
func (l *Lexical) Follow(src registry.Subscriber) (stop func()) {
	stop, err := registry.Follow(src, l.load, l.Apply)
	if err != nil {
		return stop // closed
	}
	return keepFollowing(&l.mu, &l.closed, &l.cancels, stop)
}

// load takes the snapshot of a source for Follow: it replaces the agents,
// starts the background trainer and trains once, so that Classify is ready
// when Follow returns.
func (l *Lexical) load(snapshot []registry.Agent) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.initLocked()
	l.resetLocked(snapshot, true)
	if !l.running {
		l.running = true
		go l.run()
	}
	l.mu.Unlock()
	if err := l.train(context.Background()); err != nil {
		l.logger().Error("routing: lexical training failed", "err", err)
	}
	return nil
}

// run is the background trainer: after a change it waits Debounce for
// more, then trains on the latest agents.
func (l *Lexical) run() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	debounce := l.opts.Debounce
	if debounce == 0 {
		debounce = DefaultDebounce
	}
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
		}
		if debounce > 0 {
			t := time.NewTimer(debounce)
			select {
			case <-l.stop:
				t.Stop()
				return
			case <-l.hurry:
				t.Stop()
			case <-t.C:
			}
		}
		// A kick left from before the classifier fell out of use does
		// not train: only use, Sync or Classify do.
		l.mu.Lock()
		want := l.wanted || l.used.Load()
		l.wanted = false
		l.mu.Unlock()
		if !want {
			continue
		}
		if err := l.train(ctx); err != nil && ctx.Err() == nil {
			l.logger().Error("routing: lexical training failed", "err", err)
		}
	}
}

// train trains on the current agents if they changed since the last
// training, and swaps the new model in.
func (l *Lexical) train(ctx context.Context) (err error) {
	l.trainMu.Lock()
	defer l.trainMu.Unlock()
	l.mu.Lock()
	if l.agents == nil {
		l.mu.Unlock()
		return nil
	}
	gen := l.gen
	if gen == l.trainedGen && l.trainErr == nil {
		l.mu.Unlock()
		return nil
	}
	agents := make([]registry.Agent, 0, len(l.agents))
	lives := make(map[string]*agentLive, len(l.agents))
	for name, la := range l.agents {
		agents = append(agents, la.record(name))
		lives[name] = la.live
	}
	l.used.Store(false)
	l.mu.Unlock()

	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("routing: lexical training panicked: %v", r)
		}
		if ctx.Err() != nil && err != nil {
			return // cancelled: the agents are learned next time
		}
		l.mu.Lock()
		l.trainedGen, l.trainErr = gen, err
		if gen == l.gen && err == nil {
			l.behind.Store(false)
		}
		l.learnedOnce = l.learnedOnce || err == nil
		close(l.trained)
		l.trained = make(chan struct{})
		l.mu.Unlock()
	}()
	live := func(name string) *agentLive {
		if st := lives[name]; st != nil {
			return st
		}
		return &agentLive{}
	}
	if l.onTrain != nil {
		l.onTrain()
	}
	m, err := buildModel(ctx, buildTrainSet(agents, live, l.p()), l.p())
	if err != nil {
		return err
	}
	l.mu.Lock()
	if !l.closed {
		l.model.Store(m)
	}
	l.mu.Unlock()
	l.logger().Debug("routing: lexical model trained", "agents", m.info.Agents,
		"texts", m.info.Texts, "features", m.info.Features, "duration", m.info.TrainDuration)
	return nil
}

// Sync waits until the model reflects every change the classifier had
// received when Sync was called, and returns the error of the training
// that covered them, if it failed, starting that training if needed. It
// is for tests and for hosts that want "register, then route" to see the
// new agent.
func (l *Lexical) Sync(ctx context.Context) error {
	l.mu.Lock()
	if l.agents == nil {
		l.mu.Unlock()
		return nil
	}
	target := l.gen
	running := l.running
	if running && l.trainedGen < target {
		l.wanted = true // a classifier not in use has not started it
		l.kickLocked()
	}
	l.mu.Unlock()
	if !running {
		return l.train(ctx)
	}
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		if l.trainedGen >= target {
			err := l.trainErr
			l.mu.Unlock()
			return err
		}
		ch := l.trained
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops following registries and stops the background trainer,
// waiting for it to exit (a training in progress is abandoned). Classify
// then returns [ErrClosed]. Close is idempotent and safe for concurrent
// use.
func (l *Lexical) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		if l.done != nil && l.running {
			<-l.done
		}
		return nil
	}
	l.closed = true
	cancels := l.cancels
	l.cancels = nil
	running := l.running
	if l.stop != nil {
		close(l.stop)
		close(l.trained) // wakes Sync
		l.trained = make(chan struct{})
	}
	l.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	if running {
		<-l.done
	}
	l.model.Store(nil)
	return nil
}

// classifyScratch is the per-call working memory of Classify.
type classifyScratch struct {
	x      extractor
	vec    sparse
	z      []float32
	usable []bool
	idx    []int
}

// Classify picks the agent for text. It returns [ErrNoAgents] when there
// is no agent to pick (not even a default agent) and [ErrClosed] after
// Close. A text with no words is classified as the default agent (AgentID
// "" when there is none) with confidence 0.
func (l *Lexical) Classify(ctx context.Context, text string) (Classification, error) {
	if err := ctx.Err(); err != nil {
		return Classification{}, err
	}
	if !l.used.Load() {
		l.used.Store(true)
	}
	if l.behind.Load() {
		l.catchUp(ctx)
	}
	m := l.model.Load()
	if m.empty() {
		var err error
		if m, err = l.firstModel(ctx); err != nil {
			return Classification{}, err
		}
	}
	sc, _ := l.scratch.Get().(*classifyScratch)
	if sc == nil {
		sc = &classifyScratch{}
	}
	defer l.scratch.Put(sc)
	return m.classify(text, l.now(), sc, &l.opts)
}

// catchUpWait bounds how long Classify waits for the model of a change
// when the last training was quick: a small registry is then classified
// with the agents just registered ("register, then route"), a large one
// from the previous model while the new one trains.
const catchUpWait = 250 * time.Millisecond

// catchUp starts the training of the changes the model misses, and waits
// for it, up to twice the last training's duration, when that is under
// catchUpWait.
func (l *Lexical) catchUp(ctx context.Context) {
	l.mu.Lock()
	if !l.running || l.closed {
		l.mu.Unlock()
		return
	}
	l.wanted = true
	l.kickLocked()
	l.mu.Unlock()
	m := l.model.Load()
	if m.empty() || m.info.TrainDuration > catchUpWait {
		return // firstModel waits for a first model
	}
	select {
	case l.hurry <- struct{}{}:
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, min(catchUpWait, 2*m.info.TrainDuration+10*time.Millisecond))
	defer cancel()
	_ = l.Sync(ctx) // on timeout, the previous model answers
}

// firstModel waits, up to ReadyWait, for the first model of a classifier
// that has agents but has not learned them yet, hurrying the background
// trainer past its debounce. Without agents it returns [ErrNoAgents]; when
// the wait is over, [ErrNotReady].
func (l *Lexical) firstModel(ctx context.Context) (*lexModel, error) {
	wait := l.opts.ReadyWait
	if wait == 0 {
		wait = DefaultReadyWait
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		l.mu.Lock()
		closed, running, trained := l.closed, l.running, l.trained
		learned := l.learnedLocked()
		l.mu.Unlock()
		if m := l.model.Load(); !m.empty() {
			return m, nil
		}
		switch {
		case closed:
			return nil, ErrClosed
		case learned:
			return nil, ErrNoAgents // nothing (usable) to learn
		case !running || timeout == nil:
			return nil, ErrNotReady
		}
		select {
		case l.hurry <- struct{}{}:
		default:
		}
		select {
		case <-trained:
		case <-timeout:
			return nil, ErrNotReady
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Ready reports whether the classifier has learned its first agents: a
// training succeeded, or there is nothing to learn (no agents, or none
// with words to learn from). It is false before the first [Lexical.Follow]
// or [Lexical.Reset] is done, and after Close. Once true it stays true
// (until Close), also while the first agents registered in an empty
// classifier are learned: Classify then waits for them, up to ReadyWait.
func (l *Lexical) Ready() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.agents == nil {
		return false
	}
	return l.learnedOnce || !l.model.Load().empty() || l.learnedLocked()
}

// learnedLocked reports whether the classifier has nothing left to learn
// for a first model: no agents, or a training of the current agents that
// succeeded (and found nothing to learn when the model is empty). l.mu
// must be held.
func (l *Lexical) learnedLocked() bool {
	return len(l.agents) == 0 || l.trainedGen == l.gen && l.trainErr == nil
}

// empty reports whether m is no model or one learned from no agent.
func (m *lexModel) empty() bool {
	return m == nil || len(m.classes) == 0 && m.defaultName == ""
}

// classify implements Classify on one model.
func (m *lexModel) classify(text string, now time.Time, sc *classifyScratch, o *LexicalOptions) (Classification, error) {
	out := Classification{
		DetectedLanguage: detectLanguage(text),
		Entities:         map[string]any{},
	}
	defaultUsable := m.defaultName != "" && m.defaultLive != nil && m.defaultLive.usable(now)
	fallback := func(summary string) (Classification, error) {
		if defaultUsable {
			out.AgentID = m.defaultName
		}
		out.IntentSummary = summary
		return out, nil
	}

	sc.x.opts = m.p.feat
	hs := sc.x.extract(text)
	n := len(m.classes)
	if cap(sc.z) < n {
		sc.z = make([]float32, n)
	}
	z := sc.z[:n]
	sc.usable = slices.Grow(sc.usable[:0], n)[:n]
	usable := 0
	for c := range m.classes {
		sc.usable[c] = m.classes[c].live.usable(now)
		if sc.usable[c] {
			usable++
		}
	}
	if usable == 0 {
		if !defaultUsable {
			return Classification{}, ErrNoAgents
		}
		return fallback("no specialist agent is available")
	}
	if len(hs) == 0 {
		return fallback("the message has no words to classify")
	}
	var st textStats
	sc.vec, st = m.voc.vectorize(hs, &m.p.vec, sc.vec)
	cov := st.coverage(m.p.idfCoverage)
	m.lin.logits(sc.vec, z)
	for c, ok := range sc.usable {
		if !ok {
			z[c] = float32(math.Inf(-1))
		}
	}
	softmaxInPlace(z)

	// The best classes, best first (ties by class order, which is name
	// order).
	k := o.Candidates
	if k == 0 {
		k = DefaultCandidates
	}
	keep := max(k, 2)
	sc.idx = sc.idx[:0]
	for c := range z {
		if !sc.usable[c] {
			continue
		}
		pos := len(sc.idx)
		for pos > 0 && z[sc.idx[pos-1]] < z[c] {
			pos--
		}
		if pos < keep {
			sc.idx = slices.Insert(sc.idx, pos, c)
			if len(sc.idx) > keep {
				sc.idx = sc.idx[:keep]
			}
		}
	}
	best := sc.idx[0]
	p1 := float64(z[best])
	out.AgentID = m.classes[best].name
	out.Confidence = m.cal.confidence(p1, cov)
	if len(sc.idx) > 1 {
		ratio := o.AmbiguityRatio
		if ratio == 0 {
			ratio = DefaultAmbiguityRatio
		}
		out.Ambiguous = ratio > 0 && ratio < 1 && float64(z[sc.idx[1]]) >= ratio*p1
	}
	if k > 0 {
		out.Candidates = make([]Candidate, 0, min(k, len(sc.idx)))
		for _, c := range sc.idx[:min(k, len(sc.idx))] {
			out.Candidates = append(out.Candidates, Candidate{AgentID: m.classes[c].name, Score: float64(z[c])})
		}
	}
	out.IntentSummary = m.summary(best, &sc.x, text)
	return out, nil
}

// summary describes the intent: the agent and the words of the message
// that counted most for it.
func (m *lexModel) summary(best int, x *extractor, text string) string {
	c := &m.classes[best]
	if c.isDefault {
		return "out of scope for the specialist agents (like the default agent's examples)"
	}
	toks, stems := x.words(text)
	type term struct {
		word string
		w    float32
	}
	var terms []term
	for i, s := range stems {
		col, ok := m.voc.cols[withKind(fnvString(fnvOffset, s), kindWord)]
		if !ok {
			continue
		}
		w := m.lin.weight(col, best) * m.voc.idf[col]
		if w <= 0 || textnorm.IsStopWord(toks[i]) || slices.ContainsFunc(terms, func(t term) bool { return t.word == toks[i] }) {
			continue
		}
		terms = append(terms, term{toks[i], w})
	}
	slices.SortStableFunc(terms, func(a, b term) int {
		switch {
		case a.w > b.w:
			return -1
		case a.w < b.w:
			return 1
		}
		return 0
	})
	var b strings.Builder
	b.WriteString("request for ")
	b.WriteString(c.display)
	for i, t := range terms[:min(3, len(terms))] {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(t.word)
	}
	if len(terms) > 0 {
		b.WriteString(")")
	}
	return b.String()
}
