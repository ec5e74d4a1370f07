package routing

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/session"
)

// Identity is who a routed request is for: the fields of a [Request]
// that name the user. An [IdentityResolver] fills in the ones the
// client did not know, so that a chat front-end that only knows the
// sender's Slack user id still gets the conversation keyed on the
// employee and the agent told who is asking.
type Identity struct {
	// UserID identifies the user; sessions are keyed on it, else on
	// EmployeeID, else on SlackUserID.
	UserID string
	// EmployeeID is the user's id in the organisation's directory,
	// passed to the agent (user.employeeId of POST /task, employee_id of
	// handle_message).
	EmployeeID string
	// DisplayName is the user's name, passed to the agent.
	DisplayName string
	// SlackUserID is the user's Slack member id (U… or W…).
	SlackUserID string
}

// IsZero reports whether id names nobody: the request is anonymous.
func (id Identity) IsZero() bool { return id == Identity{} }

// key is what sessions are keyed on: user_id ?? employee_id ??
// slack_user_id, "" for anonymous.
func (id Identity) key() string {
	switch {
	case id.UserID != "":
		return id.UserID
	case id.EmployeeID != "":
		return id.EmployeeID
	}
	return id.SlackUserID
}

// over returns id with every field that o sets replaced by o's.
func (id Identity) over(o Identity) Identity {
	for _, f := range [...]struct {
		dst *string
		src string
	}{
		{&id.UserID, o.UserID},
		{&id.EmployeeID, o.EmployeeID},
		{&id.DisplayName, o.DisplayName},
		{&id.SlackUserID, o.SlackUserID},
	} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	return id
}

// check validates an identity a resolver returned with the limits of a
// request.
func (id Identity) check() error {
	switch {
	case len(id.UserID) > session.MaxUserIDLen:
		return fmt.Errorf("user id is longer than %d bytes", session.MaxUserIDLen)
	case len(id.EmployeeID) > session.MaxUserIDLen:
		return fmt.Errorf("employee id is longer than %d bytes", session.MaxUserIDLen)
	case len(id.DisplayName) > MaxDisplayNameLen:
		return fmt.Errorf("display name is longer than %d bytes", MaxDisplayNameLen)
	case id.SlackUserID != "" && !IsSlackUserID(id.SlackUserID):
		return fmt.Errorf("slack user id %q is not a Slack user id", id.SlackUserID)
	}
	return nil
}

// IdentityResolver completes the [Identity] of a routed request: the
// [Router] calls it once per request that names a user, before it looks
// up the user's session, and routes with what it returns.
//
// ResolveIdentity returns the identity to route with, starting from id:
// the fields it sets replace the request's, the ones it leaves empty keep
// the request's values. A resolver that does not know the user returns
// an error matching [ErrIdentityNotFound]; any other error is a failure
// (a directory or API that could not answer). Neither fails the request:
// it goes on with the identity it came with.
//
// Implementations must be safe for concurrent use and should honour ctx,
// which carries the router's [RouterOptions.IdentityTimeout].
type IdentityResolver interface {
	ResolveIdentity(ctx context.Context, id Identity) (Identity, error)
}

// Limits and defaults of identity resolution.
const (
	// MaxDisplayNameLen is the longest display name, in bytes, of a
	// request or a resolved identity.
	MaxDisplayNameLen = 512
	// MaxSlackUserIDLen is the longest Slack user id of a request.
	MaxSlackUserIDLen = 64

	// DefaultIdentityTimeout bounds one resolution when
	// RouterOptions.IdentityTimeout is zero.
	DefaultIdentityTimeout = 3 * time.Second
	// DefaultIdentityTTL is how long an [IdentityCache] keeps an answer.
	DefaultIdentityTTL = 10 * time.Minute
	// DefaultIdentityFailureTTL is how long an [IdentityCache] keeps a
	// failure, so that an API that is down is not asked again for every
	// message of the same user.
	DefaultIdentityFailureTTL = 30 * time.Second
	// DefaultIdentityCacheSize is the number of identities an
	// [IdentityCache] holds.
	DefaultIdentityCacheSize = 10000
)

// ErrIdentityNotFound is returned by an [IdentityResolver] that does not
// know the user. It is not a failure: the request goes on with the
// identity it came with, and nothing is counted.
var ErrIdentityNotFound = apierr.New(pkg, apierr.CodeNotFound, "identity not found")

// IsSlackUserID reports whether s has the form of a Slack user id: U or W
// followed by 2 to 63 upper-case letters and digits.
func IsSlackUserID(s string) bool {
	if len(s) < 3 || len(s) > MaxSlackUserIDLen || (s[0] != 'U' && s[0] != 'W') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// resolveIdentity resolves the identity of t's request in place (see
// [IdentityResolver]); a failure is logged, reported to OnIdentityFailure
// and leaves the request's identity as it was.
func (r *Router) resolveIdentity(ctx context.Context, t *turn) {
	in := t.req.Identity()
	if r.identity == nil || in.IsZero() {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, r.identityTimeout)
	got, err := r.identity.ResolveIdentity(rctx, in)
	cancel()
	if err == nil {
		if err = got.check(); err != nil {
			err = fmt.Errorf("routing: resolver returned an invalid identity: %s", err)
		}
	}
	switch {
	case err == nil:
		t.req.setIdentity(in.over(got))
	case errors.Is(err, ErrIdentityNotFound):
		r.log.Debug("routing: identity not found", "request_id", t.id, "err", err)
	case ctx.Err() != nil:
		// The caller gave up; Handle returns its error soon enough.
	default:
		r.log.Warn("routing: identity resolution failed; the request goes on with the identity it came with",
			"request_id", t.id, "err", err)
		if r.onIdentityFailure != nil {
			r.onIdentityFailure(ctx, err)
		}
	}
}

// Identity returns the identity fields of req.
func (req *Request) Identity() Identity {
	return Identity{UserID: req.UserID, EmployeeID: req.EmployeeID, DisplayName: req.DisplayName, SlackUserID: req.SlackUserID}
}

func (req *Request) setIdentity(id Identity) {
	req.UserID, req.EmployeeID, req.DisplayName, req.SlackUserID = id.UserID, id.EmployeeID, id.DisplayName, id.SlackUserID
}

// IdentityChain returns a resolver that asks each of rs in turn until one
// knows the user: the first answer wins. A resolver that answers
// [ErrIdentityNotFound] or fails passes the question to the next; when
// none answers, the chain returns the failures joined, or
// ErrIdentityNotFound if there were none. Nil resolvers are skipped.
func IdentityChain(rs ...IdentityResolver) IdentityResolver {
	var c identityChain
	for _, r := range rs {
		if r != nil {
			c = append(c, r)
		}
	}
	return c
}

type identityChain []IdentityResolver

func (c identityChain) ResolveIdentity(ctx context.Context, id Identity) (Identity, error) {
	var errs []error
	for _, r := range c {
		got, err := r.ResolveIdentity(ctx, id)
		if err == nil {
			return got, nil
		}
		if !errors.Is(err, ErrIdentityNotFound) {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return Identity{}, ErrIdentityNotFound
	}
	return Identity{}, errors.Join(errs...)
}

// IdentityCacheOptions configures an [IdentityCache]. A nil
// *IdentityCacheOptions, like the zero value of every field, means the
// documented default.
type IdentityCacheOptions struct {
	// TTL is how long an answer, an identity or [ErrIdentityNotFound],
	// is kept. Zero means [DefaultIdentityTTL]; negative is an error.
	TTL time.Duration
	// FailureTTL is how long a failure (any other error) is kept and
	// returned again without asking the resolver. Zero means
	// [DefaultIdentityFailureTTL], negative means failures are not kept.
	// It is never longer than TTL. A cancelled call is never kept.
	FailureTTL time.Duration
	// MaxEntries bounds the cache; the least recently used entry goes
	// first. Zero means [DefaultIdentityCacheSize]; negative is an error.
	MaxEntries int
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// IdentityCache is an [IdentityResolver] that remembers the answers of
// another, keyed on the whole identity asked about, for a TTL, in a
// bounded least-recently-used cache. Concurrent first questions about the
// same identity each ask the resolver. It is safe for concurrent use;
// create it with [NewIdentityCache].
type IdentityCache struct {
	next       IdentityResolver
	ttl        time.Duration
	failureTTL time.Duration
	max        int
	now        func() time.Time

	mu    sync.Mutex
	order *list.List // of *identityEntry, most recently used first
	byID  map[Identity]*list.Element
}

type identityEntry struct {
	in      Identity
	out     Identity
	err     error
	expires time.Time
}

// NewIdentityCache returns a cache in front of next. opts may be nil.
func NewIdentityCache(next IdentityResolver, opts *IdentityCacheOptions) (*IdentityCache, error) {
	var o IdentityCacheOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case next == nil:
		return nil, errors.New("routing: identity cache: nil resolver")
	case o.TTL < 0:
		return nil, fmt.Errorf("routing: identity cache: negative TTL %s", o.TTL)
	case o.MaxEntries < 0:
		return nil, fmt.Errorf("routing: identity cache: negative size %d", o.MaxEntries)
	}
	if o.TTL == 0 {
		o.TTL = DefaultIdentityTTL
	}
	if o.FailureTTL == 0 {
		o.FailureTTL = DefaultIdentityFailureTTL
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultIdentityCacheSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &IdentityCache{
		next:       next,
		ttl:        o.TTL,
		failureTTL: min(o.FailureTTL, o.TTL),
		max:        o.MaxEntries,
		now:        o.Now,
		order:      list.New(),
		byID:       make(map[Identity]*list.Element),
	}, nil
}

// ResolveIdentity returns the kept answer for id while it lasts, else asks
// the resolver and keeps its answer.
func (c *IdentityCache) ResolveIdentity(ctx context.Context, id Identity) (Identity, error) {
	if e, ok := c.get(id); ok {
		return e.out, e.err
	}
	out, err := c.next.ResolveIdentity(ctx, id)
	ttl := c.ttl
	switch {
	case err == nil, errors.Is(err, ErrIdentityNotFound):
	case errors.Is(ctx.Err(), context.Canceled):
		ttl = 0 // the caller gave up: ask again next time
	default:
		ttl = c.failureTTL
	}
	if ttl > 0 {
		c.put(&identityEntry{in: id, out: out, err: err, expires: c.now().Add(ttl)})
	}
	return out, err
}

// Purge forgets every kept answer, as after the resolver's data changed.
func (c *IdentityCache) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	clear(c.byID)
}

// Len returns the number of identities kept, expired ones included until
// they are asked about again or pushed out.
func (c *IdentityCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *IdentityCache) get(id Identity) (*identityEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	e := el.Value.(*identityEntry)
	if !c.now().Before(e.expires) {
		c.order.Remove(el)
		delete(c.byID, id)
		return nil, false
	}
	c.order.MoveToFront(el)
	return e, true
}

func (c *IdentityCache) put(e *identityEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[e.in]; ok {
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	for c.order.Len() >= c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byID, last.Value.(*identityEntry).in)
	}
	c.byID[e.in] = c.order.PushFront(e)
}
