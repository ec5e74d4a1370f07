package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/retryafter"
	"github.com/agentmesh/agentmesh/netguard"
)

// Defaults of a [SlackIdentity].
const (
	// DefaultSlackAPIURL is the root of the Slack Web API.
	DefaultSlackAPIURL = "https://slack.com/api/"
	// DefaultSlackTimeout bounds one Slack API call.
	DefaultSlackTimeout = 5 * time.Second
	// DefaultSlackRetryAfter is how long a [SlackIdentity] waits after a
	// 429 reply without a usable Retry-After.
	DefaultSlackRetryAfter = 30 * time.Second
	// maxSlackRetryAfter caps the wait a 429 reply asks for.
	maxSlackRetryAfter = 10 * time.Minute
	// maxSlackReplyBytes caps a Slack API reply.
	maxSlackReplyBytes = 1 << 20
)

// SlackIdentityOptions configures a [SlackIdentity].
type SlackIdentityOptions struct {
	// Token is the Slack bot token (xoxb-…), sent as "Authorization:
	// Bearer <Token>"; it needs the users:read scope, and
	// users.profile:read for a custom EmployeeField. Required. It is
	// never logged and never appears in errors.
	Token string

	// APIURL is the root of the Slack Web API: methods are called at
	// APIURL + "users.info". Empty means [DefaultSlackAPIURL]. It must pass
	// Policy.
	APIURL string

	// EmployeeField names the profile field that holds the employee id:
	// the id of a custom profile field ("Xf0123ABCD", read from
	// profile.fields[id].value), or the key of a standard profile string
	// ("email", "title", "phone"…). users.info carries custom fields only
	// in some workspaces; when its profile has none, users.profile.get is
	// asked for them. Empty means Slack gives no employee id, only the
	// display name.
	EmployeeField string

	// Timeout bounds each Slack API call. Zero or negative means
	// [DefaultSlackTimeout]. The caller's context bounds it too.
	Timeout time.Duration

	// Policy is the endpoint policy of the HTTP client
	// ([netguard.Policy.NewClient]): APIURL must pass it at
	// NewSlackIdentity, and every address dialled is checked against it.
	// Nil allows private addresses but refuses the always-refused ones
	// (cloud metadata).
	Policy *netguard.Policy

	// Client configures the HTTP client built from Policy. Nil means
	// defaults.
	Client *netguard.ClientOptions

	// Now is the clock of Retry-After waits. Nil means time.Now.
	Now func() time.Time
}

// SlackIdentity is an [IdentityResolver] that asks the Slack Web API
// (users.info) who a request's slack_user_id is: the display name is the
// profile's display_name, else its real_name; the employee id is the
// profile field named by [SlackIdentityOptions.EmployeeField]. A request
// without slack_user_id, an unknown user (user_not_found) and a deleted
// one are [ErrIdentityNotFound]; other Slack errors (invalid_auth,
// missing_scope…), HTTP errors and timeouts are a *[SlackError].
//
// After a 429 reply it makes no call until the reply's Retry-After has
// passed (Slack limits users.info per workspace, not per user): calls in
// that time fail at once with a SlackError of code "ratelimited". It
// keeps no cache; put an [IdentityCache] in front of it. It is safe for
// concurrent use; create it with [NewSlackIdentity].
type SlackIdentity struct {
	token     string
	infoURL   string
	profURL   string
	field     string
	timeout   time.Duration
	client    *http.Client
	now       func() time.Time
	userAgent string

	mu           sync.Mutex
	blockedUntil time.Time
}

// SlackError is a failed Slack API call: an ok:false reply's error code
// ("invalid_auth", "user_not_found"…), "ratelimited" for a 429 reply,
// "http_<status>" for another HTTP status, "bad_reply" for a reply that
// is not the API's JSON, or "request_failed" for a call that got no reply
// (Err says why). An unknown user matches [ErrIdentityNotFound].
type SlackError struct {
	Method string // "users.info" or "users.profile.get"
	Code   string
	// RetryAfter is the wait asked for by a 429 reply.
	RetryAfter time.Duration
	Err        error
}

func (e *SlackError) Error() string {
	msg := "routing: slack " + e.Method + ": " + e.Code
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *SlackError) Unwrap() error { return e.Err }

// Is makes an unknown user match [ErrIdentityNotFound].
func (e *SlackError) Is(target error) bool {
	return target == ErrIdentityNotFound && (e.Code == "user_not_found" || e.Code == "users_not_found")
}

// NewSlackIdentity returns a Slack resolver; opts is required, with its
// Token.
func NewSlackIdentity(opts *SlackIdentityOptions) (*SlackIdentity, error) {
	if opts == nil || opts.Token == "" {
		return nil, errors.New("routing: slack identity: a token is required")
	}
	o := *opts
	if strings.ContainsAny(o.Token, "\r\n ") {
		return nil, errors.New("routing: slack identity: the token contains a space or line break")
	}
	if o.APIURL == "" {
		o.APIURL = DefaultSlackAPIURL
	}
	u, err := url.Parse(o.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("routing: slack identity: API URL %q must be an http or https URL without query or credentials", o.APIURL)
	}
	if err := o.Policy.CheckURL(o.APIURL); err != nil {
		return nil, fmt.Errorf("routing: slack identity: API URL: %w", err)
	}
	if len(o.EmployeeField) > 255 || strings.ContainsFunc(o.EmployeeField, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, fmt.Errorf("routing: slack identity: employee field %q must be a profile field id or key", o.EmployeeField)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultSlackTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	base := strings.TrimRight(u.String(), "/") + "/"
	return &SlackIdentity{
		token:     o.Token,
		infoURL:   base + "users.info",
		profURL:   base + "users.profile.get",
		field:     o.EmployeeField,
		timeout:   o.Timeout,
		client:    o.Policy.NewClient(o.Client),
		now:       o.Now,
		userAgent: "agentmesh/" + buildinfo.Version(),
	}, nil
}

// slackProfile is a user's profile: its strings, and its custom fields
// (nil when the reply has none).
type slackProfile struct {
	strings map[string]string
	fields  map[string]string
}

func (p *slackProfile) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	p.strings = map[string]string{}
	for k, v := range raw {
		var s string
		if k != "fields" && json.Unmarshal(v, &s) == nil {
			p.strings[k] = s
		}
	}
	var fields map[string]struct {
		Value string `json:"value"`
	}
	if v, ok := raw["fields"]; ok && json.Unmarshal(v, &fields) == nil && fields != nil {
		p.fields = make(map[string]string, len(fields))
		for k, f := range fields {
			p.fields[k] = f.Value
		}
	}
	return nil
}

// ResolveIdentity asks Slack who id.SlackUserID is.
func (s *SlackIdentity) ResolveIdentity(ctx context.Context, id Identity) (Identity, error) {
	if id.SlackUserID == "" {
		return Identity{}, ErrIdentityNotFound
	}
	var info struct {
		User *struct {
			ID       string        `json:"id"`
			Deleted  bool          `json:"deleted"`
			RealName string        `json:"real_name"`
			Profile  *slackProfile `json:"profile"`
		} `json:"user"`
	}
	if err := s.call(ctx, "users.info", s.infoURL, id.SlackUserID, &info); err != nil {
		return Identity{}, err
	}
	u := info.User
	switch {
	case u == nil:
		return Identity{}, &SlackError{Method: "users.info", Code: "bad_reply", Err: errors.New("no user in the reply")}
	case u.Deleted:
		return Identity{}, fmt.Errorf("routing: slack users.info: the user is deleted: %w", ErrIdentityNotFound)
	}
	prof := u.Profile
	if prof == nil {
		prof = &slackProfile{}
	}
	out := Identity{SlackUserID: id.SlackUserID}
	if u.ID != "" && IsSlackUserID(u.ID) {
		out.SlackUserID = u.ID
	}
	out.DisplayName = firstNonBlank(prof.strings["display_name"], prof.strings["real_name"], u.RealName)
	if s.field == "" {
		return out, nil
	}
	if v, ok := prof.fields[s.field]; ok {
		out.EmployeeID = strings.TrimSpace(v)
		return out, nil
	}
	if v, ok := prof.strings[s.field]; ok {
		out.EmployeeID = strings.TrimSpace(v)
		return out, nil
	}
	if prof.fields != nil || !strings.HasPrefix(s.field, "Xf") {
		return out, nil // the user has no such field
	}
	// users.info left the custom fields out: users.profile.get has them.
	var pg struct {
		Profile *slackProfile `json:"profile"`
	}
	switch err := s.call(ctx, "users.profile.get", s.profURL, id.SlackUserID, &pg); {
	case errors.Is(err, ErrIdentityNotFound):
		return out, nil // users.info knew the user: keep what it said
	case err != nil:
		return Identity{}, err
	}
	if pg.Profile != nil {
		out.EmployeeID = strings.TrimSpace(pg.Profile.fields[s.field])
	}
	return out, nil
}

// call calls method at u for user and decodes an ok reply into dst.
func (s *SlackIdentity) call(ctx context.Context, method, u, user string, dst any) error {
	if wait := s.blocked(); wait > 0 {
		return &SlackError{Method: method, Code: "ratelimited", RetryAfter: wait}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+url.Values{"user": {user}}.Encode(), nil)
	if err != nil {
		return &SlackError{Method: method, Code: "request_failed", Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which names the user
		}
		return &SlackError{Method: method, Code: "request_failed", Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSlackReplyBytes+1))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		wait := retryafter.Parse(resp.Header.Get("Retry-After"), s.now(), maxSlackRetryAfter)
		if wait <= 0 {
			wait = DefaultSlackRetryAfter
		}
		s.block(wait)
		return &SlackError{Method: method, Code: "ratelimited", RetryAfter: wait}
	case resp.StatusCode != http.StatusOK:
		return &SlackError{Method: method, Code: fmt.Sprintf("http_%d", resp.StatusCode)}
	case err != nil:
		return &SlackError{Method: method, Code: "request_failed", Err: err}
	case len(data) > maxSlackReplyBytes:
		return &SlackError{Method: method, Code: "bad_reply", Err: fmt.Errorf("reply over %d bytes", maxSlackReplyBytes)}
	}
	var head struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return &SlackError{Method: method, Code: "bad_reply", Err: errors.New("reply is not JSON")}
	}
	if !head.OK {
		code := head.Error
		if code == "" || len(code) > 64 || strings.ContainsFunc(code, func(r rune) bool { return r <= ' ' || r > '~' }) {
			code = "unknown_error"
		}
		return &SlackError{Method: method, Code: code}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return &SlackError{Method: method, Code: "bad_reply", Err: errors.New("reply does not have the API's shape")}
	}
	return nil
}

// blocked returns how long calls must still wait after a 429, 0 if none.
func (s *SlackIdentity) blocked() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blockedUntil.Sub(s.now())
}

func (s *SlackIdentity) block(wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if until := s.now().Add(wait); until.After(s.blockedUntil) {
		s.blockedUntil = until
	}
}

// firstNonBlank returns the first of vs that is not blank, trimmed.
func firstNonBlank(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
