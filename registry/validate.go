package registry

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/netguard"
)

// Limits of the agent record (docs/AGENTS.md#the-agent-record).
const (
	MaxNameLen                 = 128
	MaxDisplayNameLen          = 200
	MaxDescriptionLen          = 5000
	MaxCapabilities            = 64
	MaxCapabilityLen           = 128
	MaxExamples                = 200
	MaxExampleLen              = 500
	MaxResources               = 64
	MaxResourceURILen          = 2048
	MaxResourceDescriptionLen  = 1000
	MaxEndpointLen             = 2048
	MaxClarificationContextLen = 500
	MaxLabels                  = 32
	MaxLabelValueLen           = 256
	MaxAuthTokenLen            = 4096
	MinTTLSeconds              = 5
	MaxTTLSeconds              = 86400
)

var (
	nameRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	labelKeyRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]{0,62}$`)
	// headerNameRE is an RFC 9110 field name (token).
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
)

// reservedHeaders may not carry an agent's credentials: the mesh sets them
// itself, or they change how the request is framed.
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "content-type": true, "transfer-encoding": true,
	"connection": true, "te": true, "upgrade": true, "trailer": true, "user-agent": true,
	"x-mesh-delegation-id": true, "traceparent": true, "tracestate": true,
}

// MaxItems returns the most items the list or map field of the agent
// record whose JSON name is field may hold (MaxCapabilities, MaxExamples,
// MaxResources, MaxLabels), and false for a field without such a limit.
// A decoder may refuse a record over one with [TooManyItems] before it
// decodes the items.
func MaxItems(field string) (int, bool) {
	switch field {
	case "capabilities":
		return MaxCapabilities, true
	case "examples":
		return MaxExamples, true
	case "resources":
		return MaxResources, true
	case "labels":
		return MaxLabels, true
	}
	return 0, false
}

// TooManyItems is the error [Agent.Validate] returns for the field
// (named as by [MaxItems]) holding n items, more than its limit: a
// *[FieldError] of kind [ErrInvalid].
func TooManyItems(field string, n int) error {
	return tooMany(field, n)
}

func tooMany(field string, n int) *FieldError {
	max, _ := MaxItems(field)
	unit := "items"
	if field == "labels" {
		unit = "entries"
	}
	return invalid(field, "must have at most %d %s, got %d", max, unit, n)
}

// ValidName reports whether name is a valid agent name.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Normalize fills the record's defaults into a, in place: the
// display name, the protocol, the auth type, the confidence threshold (forced
// to 0 for the default agent), an empty capability list, and the endpoint of
// an in-process agent. Server-set fields are cleared. It does not validate.
func (a *Agent) Normalize() {
	if a.DisplayName == "" {
		a.DisplayName = a.Name
	}
	if a.Protocol == "" {
		a.Protocol = ProtocolHTTP
	}
	if a.Protocol == ProtocolInProcess {
		a.Endpoint = "inprocess:" + a.Name
	}
	if a.Auth != nil && a.Auth.Type == "" {
		a.Auth.Type = AuthNone
	}
	if a.Auth != nil && *a.Auth == (Auth{Type: AuthNone}) {
		a.Auth = nil
	}
	th := a.Threshold()
	a.ConfidenceThreshold = &th
	if a.Capabilities == nil {
		a.Capabilities = []string{}
	}
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	a.RegisteredAt, a.UpdatedAt, a.LastSeen = zeroTime, zeroTime, zeroTime
	a.Source, a.Stale = "", false
}

// Validate checks a normalised agent against every rule of the agent record
// and, for http/mcp/a2a endpoints, against the endpoint policy p (a nil p
// allows private addresses but refuses the always-refused ones).
//
// It returns nil, one *[FieldError], or several joined (in field order,
// with the Error text of [errors.Join]), so a caller can report every
// problem at once: [FieldErrors] lists them, [errors.As] finds the first,
// and [apierr.Describe] gives the code of the first and all the messages.
func (a *Agent) Validate(p *netguard.Policy) error {
	var errs []error
	add := func(e *FieldError) { errs = append(errs, e) }
	text := func(field, s string, maxLen int, required bool) {
		switch n := utf8.RuneCountInString(s); {
		case !utf8.ValidString(s):
			add(invalid(field, "must be valid UTF-8"))
		case required && n == 0:
			add(invalid(field, "is required"))
		case n > maxLen:
			add(invalid(field, "must be at most %d characters, got %d", maxLen, n))
		}
	}

	if !ValidName(a.Name) {
		add(invalid("name", "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (1–128 letters, digits, '.', '_' or '-', starting with a letter or digit)"))
	}
	text("displayName", a.DisplayName, MaxDisplayNameLen, false)
	text("description", a.Description, MaxDescriptionLen, false)
	if a.Description == "" && len(a.Capabilities) == 0 {
		add(invalid("description", "may be empty only when capabilities are given"))
	}
	if len(a.Capabilities) > MaxCapabilities {
		add(tooMany("capabilities", len(a.Capabilities)))
	}
	for i, c := range a.Capabilities {
		text(fmt.Sprintf("capabilities[%d]", i), c, MaxCapabilityLen, true)
	}
	if len(a.Examples) > MaxExamples {
		add(tooMany("examples", len(a.Examples)))
	}
	for i, e := range a.Examples {
		text(fmt.Sprintf("examples[%d]", i), e, MaxExampleLen, true)
	}
	if len(a.Resources) > MaxResources {
		add(tooMany("resources", len(a.Resources)))
	}
	for i, r := range a.Resources {
		field := fmt.Sprintf("resources[%d]", i)
		text(field+".uri", r.URI, MaxResourceURILen, true)
		text(field+".description", r.Description, MaxResourceDescriptionLen, false)
		switch r.Access {
		case "", AccessRead, AccessWrite, AccessAdmin:
		default:
			add(invalid(field+".access", "must be one of read, write, admin"))
		}
	}
	switch a.Protocol {
	case ProtocolHTTP, ProtocolMCP, ProtocolA2A:
		if e := checkEndpoint(a.Endpoint, p); e != nil {
			add(e)
		}
	case ProtocolInProcess:
	default:
		add(invalid("protocol", "must be one of http, mcp, a2a, inprocess"))
	}
	if a.Auth != nil {
		checkAuth(a.Auth, add)
	}
	if th := a.ConfidenceThreshold; th != nil && !(*th >= 0 && *th <= 1) {
		add(invalid("confidenceThreshold", "must be between 0 and 1"))
	}
	text("clarificationContext", a.ClarificationContext, MaxClarificationContextLen, false)
	if len(a.Labels) > MaxLabels {
		add(tooMany("labels", len(a.Labels)))
	}
	for _, k := range sortedKeys(a.Labels) {
		if !labelKeyRE.MatchString(k) {
			add(invalid("labels", "key %q must match ^[a-z0-9][a-z0-9._/-]{0,62}$", k))
		}
		text("labels."+k, a.Labels[k], MaxLabelValueLen, false)
	}
	if t := a.TTLSeconds; t != 0 && (t < MinTTLSeconds || t > MaxTTLSeconds) {
		add(invalid("ttlSeconds", "must be 0 (no expiry) or between %d and %d", MinTTLSeconds, MaxTTLSeconds))
	}
	return apierr.Join(errs...)
}

func checkEndpoint(endpoint string, p *netguard.Policy) *FieldError {
	switch {
	case endpoint == "":
		return invalid("endpoint", "is required")
	case len(endpoint) > MaxEndpointLen:
		return invalid("endpoint", "must be at most %d characters", MaxEndpointLen)
	}
	u, err := url.Parse(endpoint)
	if err != nil || !u.IsAbs() {
		return invalid("endpoint", "must be an absolute http or https URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		// Other schemes are among the endpoint policy's refusals
		// (docs/SECURITY.md#outbound-calls-ssrf).
		return &FieldError{Field: "endpoint", Rule: "scheme must be http or https", kind: ErrEndpointNotAllowed}
	}
	if u.Host == "" || u.Opaque != "" {
		return invalid("endpoint", "must be an absolute http or https URL")
	}
	if err := p.CheckURL(endpoint); err != nil {
		rule := err.Error()
		var re *netguard.RefusedError
		if errors.As(err, &re) {
			rule = re.Rule
		}
		return &FieldError{Field: "endpoint", Rule: rule, kind: ErrEndpointNotAllowed}
	}
	return nil
}

func checkAuth(auth *Auth, add func(*FieldError)) {
	token := func() {
		switch {
		case auth.Token == "":
			add(invalid("auth.token", "is required for auth type %s", auth.Type))
		case len(auth.Token) > MaxAuthTokenLen:
			add(invalid("auth.token", "must be at most %d bytes", MaxAuthTokenLen))
		case strings.ContainsFunc(auth.Token, isControl):
			add(invalid("auth.token", "must not contain control characters"))
		}
	}
	switch auth.Type {
	case AuthNone:
		if auth.Token != "" || auth.HeaderName != "" {
			add(invalid("auth", "type none takes no token or headerName"))
		}
	case AuthBearer:
		token()
		if auth.HeaderName != "" {
			add(invalid("auth.headerName", "is only for auth type header"))
		}
	case AuthHeader:
		token()
		switch {
		case !headerNameRE.MatchString(auth.HeaderName):
			add(invalid("auth.headerName", "must be an HTTP header name"))
		case reservedHeaders[strings.ToLower(auth.HeaderName)]:
			add(invalid("auth.headerName", "%s is set by the mesh and cannot carry credentials", auth.HeaderName))
		}
	default:
		add(invalid("auth.type", "must be one of none, bearer, header"))
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
