package httpserver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agentmesh/agentmesh/principal"
)

// Scope is a permission a token grants
// (docs/SECURITY.md#tokens-and-scopes). Each route needs one; a token
// holds a set of them. Scopes are independent: admin does not imply the
// others.
type Scope string

// The scopes a token can hold: read, register, delegate, route and admin.
const (
	ScopeRead     Scope = "read"
	ScopeRegister Scope = "register"
	ScopeDelegate Scope = "delegate"
	ScopeRoute    Scope = "route"
	ScopeAdmin    Scope = "admin"
)

// scopeOrder lists every scope, in the documented order (read, register,
// delegate, route, admin): what Options.Token grants.
var scopeOrder = [...]Scope{ScopeRead, ScopeRegister, ScopeDelegate, ScopeRoute, ScopeAdmin}

// MeshTokenName is the name under which Options.Token (the MESH_TOKEN)
// appears in logs, rate limits and [Identity.Name].
const MeshTokenName = "mesh_token"

// scopeSet is a bit set of scopes.
type scopeSet uint8

func scopeBit(s Scope) scopeSet {
	if i := slices.Index(scopeOrder[:], s); i >= 0 {
		return 1 << i
	}
	return 0
}

const allScopes scopeSet = 1<<5 - 1

// Token is one accepted API token: an entry of the tokens file
// (`--tokens-file`, README.md#configuration). Set exactly one of Token
// (the secret in clear) and SHA256 (the hex SHA-256 of the secret, so the
// file need not hold it).
type Token struct {
	// Name identifies the token in logs, rate limits and [Identity.Name].
	// Required and unique; it is not a secret.
	Name string `yaml:"name"`
	// Token is the secret itself.
	Token string `yaml:"token"`
	// SHA256 is the lower- or upper-case hex SHA-256 of the secret (64
	// hex digits), as printed by [HashToken].
	SHA256 string `yaml:"token_sha256"`
	// Principal is who the token acts for: the owner of the agents it
	// registers and of the delegations and sessions it starts. Several
	// tokens may share one, so that a rotated token keeps what its
	// predecessor owned. Empty means the token's Name.
	Principal string `yaml:"principal"`
	// Scopes are the permissions the token grants; at least one.
	Scopes []Scope `yaml:"scopes"`
}

// tokenEntry is a Token ready for comparison.
type tokenEntry struct {
	name      string
	principal string
	digest    [sha256.Size]byte
	scopes    scopeSet
}

// tokenSet is an immutable set of accepted tokens, swapped atomically.
type tokenSet struct {
	entries []tokenEntry
}

// buildTokens checks the configured tokens and prepares them: mesh (the
// all-scope token, may be empty) and list. Names and secrets must be unique.
func buildTokens(mesh string, list []Token) (*tokenSet, error) {
	set := &tokenSet{}
	if mesh != "" {
		set.entries = append(set.entries, tokenEntry{name: MeshTokenName, principal: principal.Default, digest: sha256.Sum256([]byte(mesh)), scopes: allScopes})
	}
	for i, t := range list {
		where := fmt.Sprintf("token %d", i+1)
		if t.Name != "" {
			where = fmt.Sprintf("token %q", t.Name)
		}
		e := tokenEntry{name: t.Name, principal: cmp.Or(t.Principal, t.Name)}
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("httpserver: %s: name is required", where)
		case hasControl(t.Name):
			return nil, fmt.Errorf("httpserver: %s: name has control characters", where)
		case len(t.Name) > 128:
			return nil, fmt.Errorf("httpserver: %s: name is longer than 128 bytes", where)
		case hasControl(t.Principal):
			return nil, fmt.Errorf("httpserver: %s: principal has control characters", where)
		case len(t.Principal) > 128:
			return nil, fmt.Errorf("httpserver: %s: principal is longer than 128 bytes", where)
		case (t.Token == "") == (t.SHA256 == ""):
			return nil, fmt.Errorf("httpserver: %s: set exactly one of token and token_sha256", where)
		case t.Token != "":
			e.digest = sha256.Sum256([]byte(t.Token))
		default:
			d, err := hex.DecodeString(t.SHA256)
			if err != nil || len(d) != sha256.Size {
				return nil, fmt.Errorf("httpserver: %s: token_sha256 must be 64 hex digits", where)
			}
			copy(e.digest[:], d)
		}
		if len(t.Scopes) == 0 {
			return nil, fmt.Errorf("httpserver: %s: scopes must list at least one of read, register, delegate, route, admin", where)
		}
		for _, s := range t.Scopes {
			b := scopeBit(s)
			if b == 0 {
				return nil, fmt.Errorf("httpserver: %s: unknown scope %q (want read, register, delegate, route or admin)", where, s)
			}
			e.scopes |= b
		}
		for _, o := range set.entries {
			if o.name == e.name {
				return nil, fmt.Errorf("httpserver: %s: the name is used twice", where)
			}
			if o.digest == e.digest {
				return nil, fmt.Errorf("httpserver: %s: the same secret as token %q", where, o.name)
			}
		}
		set.entries = append(set.entries, e)
	}
	return set, nil
}

// identity is the caller that presents e's secret.
func (e *tokenEntry) identity() Identity {
	return Identity{Name: e.name, Principal: e.principal, scopes: e.scopes}
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// lookup returns the entry whose secret is token, comparing SHA-256
// digests in constant time against every entry (the time taken does not
// depend on which entry matched, or whether one did).
func (s *tokenSet) lookup(token string) (tokenEntry, bool) {
	d := sha256.Sum256([]byte(token))
	match := -1
	for i := range s.entries {
		if subtle.ConstantTimeCompare(d[:], s.entries[i].digest[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return tokenEntry{}, false
	}
	return s.entries[match], true
}

// ParseTokens parses a tokens file (`--tokens-file`, see
// docs/SECURITY.md#tokens-and-scopes): a YAML list of
// {name, token | token_sha256, scopes}. Unknown keys, missing or duplicate
// names, entries with both or neither secret, and unknown scopes are
// errors (with the line where YAML knows it).
//
//   - name: ci
//     token_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//     scopes: [read, delegate]
func ParseTokens(data []byte) ([]Token, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var list []Token
	if err := dec.Decode(&list); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("httpserver: tokens file: %w", err)
	}
	if _, err := buildTokens("", list); err != nil {
		return nil, err
	}
	return list, nil
}

// HashToken returns the hex SHA-256 of token: the token_sha256 value of a
// tokens file entry.
func HashToken(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// GenerateToken returns a new random token (26 base32 characters, 130
// bits of entropy), for a server started with no token configured.
func GenerateToken() string {
	return rand.Text()
}

// credentials returns the token a request presents: "Authorization:
// Bearer <token>", else "X-API-Key: <token>". present reports whether the
// request carried either header at all (a malformed one counts).
func credentials(r *http.Request) (token string, present bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := bearerToken(r); ok {
			return tok, true
		}
		if k := r.Header.Get("X-Api-Key"); k != "" {
			return k, true
		}
		return "", true
	}
	if k, ok := r.Header["X-Api-Key"]; ok {
		if len(k) == 0 {
			return "", true
		}
		return k[0], true
	}
	return "", false
}

// bearerToken returns the token of r's "Authorization: Bearer <token>"
// header; ok is false without one.
func bearerToken(r *http.Request) (token string, ok bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// Identity is the authenticated caller of a request: the token's name,
// principal and scopes. Handlers mounted with [Server.Handle] read it with
// [IdentityFrom] to apply finer checks (per MCP tool, say).
type Identity struct {
	// Name is the token's name (MeshTokenName for Options.Token).
	Name string
	// Principal is who the token acts for ([Token.Principal];
	// principal.Default for Options.Token).
	Principal string
	scopes    scopeSet
}

// principal is the caller as the core packages see it: an admin token
// acts on every principal's records.
func (id Identity) principal() principal.Principal {
	return principal.Principal{Name: id.Principal, Admin: id.Has(ScopeAdmin)}
}

// Has reports whether the identity holds scope s.
func (id Identity) Has(s Scope) bool {
	b := scopeBit(s)
	return b != 0 && id.scopes&b == b
}

// Scopes returns the identity's scopes in the documented order (read,
// register, delegate, route, admin).
func (id Identity) Scopes() []Scope {
	var out []Scope
	for _, s := range scopeOrder {
		if id.Has(s) {
			out = append(out, s)
		}
	}
	return out
}

type identityKey struct{}

// IdentityFrom returns the authenticated caller of the request whose
// context is ctx, for handlers mounted with [Server.Handle] (and the
// callback route), and for the hooks of the delegation client and the
// router, whose contexts the server gives it too. ok is false when the
// request was not authenticated.
func IdentityFrom(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// WithIdentity returns a copy of ctx carrying id, and id's principal for
// the core packages (principal.FromContext), as the server passes it to
// its handlers and mounted ones. It lets tests of a mounted handler run
// it without the server.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return principal.NewContext(context.WithValue(ctx, identityKey{}, id), id.principal())
}

// NewIdentity returns an identity named name holding scopes; unknown
// scopes are ignored. It is meant for tests of mounted handlers
// (see [WithIdentity]).
func NewIdentity(name string, scopes ...Scope) Identity {
	id := Identity{Name: name, Principal: name}
	for _, s := range scopes {
		id.scopes |= scopeBit(s)
	}
	return id
}
