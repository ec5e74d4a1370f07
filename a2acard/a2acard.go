package a2acard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// MaxCardBytes is the largest card body Fetch reads (1 MiB).
const MaxCardBytes = 1 << 20

// CodeCardFetchFailed is the code of [ErrFetch]: the agent card could
// not be fetched (the HTTP API answers it with 502).
const CodeCardFetchFailed = "card_fetch_failed"

// Sentinel errors. Match them with [errors.Is]. Both describe themselves
// with their code and message (invalid_argument for ErrInvalidCard); an
// ErrFetch error also wraps the failure that caused it, such as the
// endpoint policy's refusal.
var (
	// ErrFetch: the card could not be fetched (bad URL, network failure,
	// refusal by the endpoint policy, or a status other than 200).
	ErrFetch = apierr.New("a2acard", CodeCardFetchFailed, "cannot fetch the agent card")
	// ErrInvalidCard: the body is not a usable A2A Agent Card; the error
	// names the problem.
	ErrInvalidCard = apierr.New("a2acard", apierr.CodeInvalidArgument, "invalid agent card")
)

// Labels ToAgent sets on the agent record.
const (
	// LabelVersion is the A2A protocol version of the chosen interface.
	LabelVersion = "a2a.version"
	// LabelAgentVersion is the agent's own version (the card's version).
	LabelAgentVersion = "a2a.agent-version"
	// LabelTenant is the tenant of the chosen interface, when it has one.
	LabelTenant = "a2a.tenant"
	// LabelCardURL is the URL the card was read from (left out when it is
	// longer than a label value may be).
	LabelCardURL = "a2a.card-url"
)

// Fetch GETs the Agent Card at cardURL through client and decodes it. A nil
// client means one made by [netguard.Policy.NewClient] for the nil policy
// (private addresses allowed, no redirects); pass the mesh's SSRF-safe
// client instead, and reuse it. Bound the call with ctx.
//
// Only a 200 response is accepted (a redirect is not followed and is an
// error), and at most [MaxCardBytes] are read. A card in the A2A 0.3 form
// (top-level url) is converted to the 1.0 form.
func Fetch(ctx context.Context, client *http.Client, cardURL string) (*a2a.AgentCard, error) {
	u, err := url.Parse(cardURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, apierr.Errorf(ErrFetch, "the card URL must be an absolute http or https URL")
	}
	if client == nil {
		client = (*netguard.Policy)(nil).NewClient(nil)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, apierr.Wrap(ErrFetch, err, "")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, apierr.WrapHidden(ErrFetch, err, "no answer before the deadline")
		}
		return nil, apierr.WrapHidden(ErrFetch, err, "%s", netguard.DialCause(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return nil, apierr.Errorf(ErrFetch, "status %d (redirects are not followed; use the final URL)", resp.StatusCode)
		}
		return nil, apierr.Errorf(ErrFetch, "status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxCardBytes+1))
	if err != nil {
		return nil, apierr.WrapHidden(ErrFetch, err, "reading the body: %s", netguard.DialCause(err))
	}
	if len(body) > MaxCardBytes {
		return nil, apierr.Errorf(ErrInvalidCard, "the card is over %d bytes", MaxCardBytes)
	}
	return Parse(body)
}

// Parse decodes a card body: the A2A 1.0 form, or the 0.3 form (top-level
// url) converted to 1.0. It returns an error matching [ErrInvalidCard] when
// body is not a JSON object of either form.
func Parse(body []byte) (*a2a.AgentCard, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, apierr.Errorf(ErrInvalidCard, "the body is not a JSON object")
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		// An A2A 0.3 card keeps its security schemes in the OpenAPI form,
		// which the 1.0 decoder refuses; the mesh does not use them.
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			return nil, apierr.Wrap(ErrInvalidCard, err, "")
		}
		delete(obj, "securitySchemes")
		delete(obj, "security")
		delete(obj, "securityRequirements")
		b, _ := json.Marshal(obj)
		card = a2a.AgentCard{}
		if json.Unmarshal(b, &card) != nil {
			return nil, apierr.Wrap(ErrInvalidCard, err, "")
		}
	}
	if len(card.SupportedInterfaces) == 0 {
		card.SupportedInterfaces = legacyInterfaces(body)
	}
	return &card, nil
}

// legacyInterfaces reads the interfaces of an A2A 0.3 card: url with
// preferredTransport (JSONRPC when absent) and protocolVersion, then
// additionalInterfaces.
func legacyInterfaces(body []byte) []*a2a.AgentInterface {
	var old struct {
		URL                  string `json:"url"`
		PreferredTransport   string `json:"preferredTransport"`
		ProtocolVersion      string `json:"protocolVersion"`
		AdditionalInterfaces []struct {
			URL       string `json:"url"`
			Transport string `json:"transport"`
		} `json:"additionalInterfaces"`
	}
	if json.Unmarshal(body, &old) != nil || old.URL == "" {
		return nil
	}
	transport := old.PreferredTransport
	if transport == "" {
		transport = string(a2a.TransportProtocolJSONRPC)
	}
	out := []*a2a.AgentInterface{{URL: old.URL, ProtocolBinding: a2a.TransportProtocol(transport), ProtocolVersion: a2a.ProtocolVersion(old.ProtocolVersion)}}
	for _, in := range old.AdditionalInterfaces {
		out = append(out, &a2a.AgentInterface{URL: in.URL, ProtocolBinding: a2a.TransportProtocol(in.Transport), ProtocolVersion: a2a.ProtocolVersion(old.ProtocolVersion)})
	}
	return out
}

// ToAgent maps card, read from cardURL, to an agent record with protocol
// a2a, ready for [registry.Registry.Register]:
//
//   - name: the card's name lower-cased, every run of characters outside
//     [a-z0-9._-] replaced by "-", trimmed to 128 characters; a name with
//     no such characters becomes "a2a-" and 12 hex digits of its SHA-256.
//   - displayName and description: the card's (the description followed by
//     a list of the skills), cut to the record's limits.
//   - capabilities: the skills' names, then their tags, without duplicates
//     (case-insensitive), at most [registry.MaxCapabilities].
//   - examples: the skills' examples, without duplicates, at most
//     [registry.MaxExamples].
//   - endpoint: the URL of the card's first JSON-RPC interface (one for
//     A2A 1.x preferred), resolved against cardURL when relative.
//   - labels: [LabelVersion], [LabelAgentVersion], [LabelTenant],
//     [LabelCardURL].
//
// It is deterministic. Errors match [ErrInvalidCard]: no name, no
// description and no skills, or no usable JSON-RPC interface. The record
// is not validated otherwise; Register does that.
func ToAgent(card *a2a.AgentCard, cardURL string) (registry.Agent, error) {
	if card == nil {
		return registry.Agent{}, apierr.Errorf(ErrInvalidCard, "no card")
	}
	name := clean(card.Name)
	if name == "" {
		return registry.Agent{}, apierr.Errorf(ErrInvalidCard, "the card has no name")
	}
	iface, endpoint, err := jsonRPCEndpoint(card.SupportedInterfaces, cardURL)
	if err != nil {
		return registry.Agent{}, err
	}
	a := registry.Agent{
		Name:        agentName(name),
		DisplayName: truncate(name, registry.MaxDisplayNameLen),
		Endpoint:    endpoint,
		Protocol:    registry.ProtocolA2A,
	}
	a.Capabilities, a.Examples = skillsToLists(card.Skills)
	a.Description = description(clean(card.Description), card.Skills)
	if a.Description == "" && len(a.Capabilities) == 0 {
		return registry.Agent{}, apierr.Errorf(ErrInvalidCard, "the card has neither a description nor skills")
	}
	labels := map[string]string{}
	setLabel := func(k, v string) {
		if v = clean(v); v != "" && utf8.RuneCountInString(v) <= registry.MaxLabelValueLen {
			labels[k] = v
		}
	}
	setLabel(LabelVersion, string(iface.ProtocolVersion))
	setLabel(LabelAgentVersion, card.Version)
	setLabel(LabelTenant, iface.Tenant)
	setLabel(LabelCardURL, cardURL)
	if len(labels) > 0 {
		a.Labels = labels
	}
	return a, nil
}

// jsonRPCEndpoint picks the interface the mesh talks to: the first JSON-RPC
// one for A2A 1.x, else the first JSON-RPC one; its URL is resolved against
// cardURL.
func jsonRPCEndpoint(ifaces []*a2a.AgentInterface, cardURL string) (*a2a.AgentInterface, string, error) {
	var pick *a2a.AgentInterface
	for _, in := range ifaces {
		if in == nil || !strings.EqualFold(strings.TrimSpace(string(in.ProtocolBinding)), string(a2a.TransportProtocolJSONRPC)) || strings.TrimSpace(in.URL) == "" {
			continue
		}
		if pick == nil {
			pick = in
		}
		if v := string(in.ProtocolVersion); v == "1" || strings.HasPrefix(v, "1.") {
			pick = in
			break
		}
	}
	if pick == nil {
		return nil, "", apierr.Errorf(ErrInvalidCard, "the card declares no JSON-RPC interface (supportedInterfaces with protocolBinding JSONRPC), the binding the mesh speaks")
	}
	ref, err := url.Parse(strings.TrimSpace(pick.URL))
	if err != nil {
		return nil, "", apierr.Errorf(ErrInvalidCard, "the JSON-RPC interface URL %q is malformed", pick.URL)
	}
	if !ref.IsAbs() {
		base, err := url.Parse(cardURL)
		if err != nil || !base.IsAbs() {
			return nil, "", apierr.Errorf(ErrInvalidCard, "the JSON-RPC interface URL %q is relative and the card URL cannot resolve it", pick.URL)
		}
		ref = base.ResolveReference(ref)
	}
	if (ref.Scheme != "http" && ref.Scheme != "https") || ref.Host == "" {
		return nil, "", apierr.Errorf(ErrInvalidCard, "the JSON-RPC interface URL %q is not an http or https URL", pick.URL)
	}
	return pick, ref.String(), nil
}

// skillsToLists collects capabilities (skill names, then tags) and examples.
func skillsToLists(skills []a2a.AgentSkill) (caps, examples []string) {
	seen := map[string]bool{}
	addCap := func(s string) {
		s = truncate(clean(s), registry.MaxCapabilityLen)
		if k := strings.ToLower(s); s != "" && !seen[k] && len(caps) < registry.MaxCapabilities {
			seen[k] = true
			caps = append(caps, s)
		}
	}
	for _, sk := range skills {
		if sk.Name != "" {
			addCap(sk.Name)
		} else {
			addCap(sk.ID)
		}
	}
	for _, sk := range skills {
		for _, t := range sk.Tags {
			addCap(t)
		}
	}
	seenEx := map[string]bool{}
	for _, sk := range skills {
		for _, e := range sk.Examples {
			e = truncate(clean(e), registry.MaxExampleLen)
			if e != "" && !seenEx[e] && len(examples) < registry.MaxExamples {
				seenEx[e] = true
				examples = append(examples, e)
			}
		}
	}
	return caps, examples
}

// description is the card's description followed by one line per skill
// ("- name: description"), cut at registry.MaxDescriptionLen characters on
// a line boundary.
func description(desc string, skills []a2a.AgentSkill) string {
	desc = truncate(desc, registry.MaxDescriptionLen)
	n := utf8.RuneCountInString(desc)
	var b strings.Builder
	b.WriteString(desc)
	header := false
	for _, sk := range skills {
		name, d := clean(sk.Name), clean(sk.Description)
		if name == "" {
			name = clean(sk.ID)
		}
		if name == "" || d == "" {
			continue
		}
		line := "- " + name + ": " + strings.Join(strings.Fields(d), " ")
		add := "\n" + line
		if !header {
			add = "\n\nSkills:" + add
			if n == 0 {
				add = "Skills:\n" + line
			}
		}
		if c := utf8.RuneCountInString(add); n+c <= registry.MaxDescriptionLen {
			b.WriteString(add)
			n += c
			header = true
		}
	}
	return b.String()
}

// agentName maps a card name to the registry's name rule.
func agentName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimLeft(b.String(), "._-")
	if len(s) > registry.MaxNameLen {
		s = s[:registry.MaxNameLen]
	}
	s = strings.TrimRight(s, "._-")
	if s == "" {
		sum := sha256.Sum256([]byte(name))
		s = "a2a-" + hex.EncodeToString(sum[:6])
	}
	return s
}

// clean makes s valid UTF-8 and trims its spaces.
func clean(s string) string {
	return strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
}

// truncate cuts s to at most n runes.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n]))
}
