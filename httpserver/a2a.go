package httpserver

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
)

// CardFetchTimeout bounds the fetch of an agent card by POST
// /v1/agents/import.
const CardFetchTimeout = 10 * time.Second

// agentCardMaxAge is how long clients may cache the mesh's agent card.
const agentCardMaxAge = "public, max-age=60"

// a2aRoutes registers the A2A routes that are configured: importing an
// agent from its Agent Card and serving the mesh's own card (see
// docs/API.md#a2a).
func (s *Server) a2aRoutes() {
	if s.cardClient != nil {
		s.handle("POST /v1/agents/import", authScope, ScopeRegister, s.importAgent)
	}
	if s.agentCard != nil {
		s.handle("GET /.well-known/agent-card.json", authNone, "", s.meshAgentCard)
	}
}

func (s *Server) meshAgentCard(w *recorder, r *http.Request) {
	w.Header().Set("Cache-Control", agentCardMaxAge)
	writeJSON(w, http.StatusOK, s.agentCard)
}

// importBody is the body of POST /v1/agents/import.
type importBody struct {
	CardURL string `json:"cardUrl"`
}

func (s *Server) importAgent(w *recorder, r *http.Request) {
	var b importBody
	if e := s.decodeBody(w, r, &b); e != nil {
		s.fail(w, e)
		return
	}
	// refused records and answers a card that could not be imported.
	refused := func(e *apiError) {
		details := map[string]string{"via": "import", "card_host": audit.EndpointHost(b.CardURL)}
		s.auditOutcome(w, audit.ActionAgentRegister, "", e, details)
		s.fail(w, e)
	}
	if e := checkCardURL(b.CardURL); e != nil {
		refused(e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), CardFetchTimeout)
	card, err := a2acard.Fetch(ctx, s.cardClient, b.CardURL)
	cancel()
	if err != nil {
		refused(cardError(r.Context(), err))
		return
	}
	a, err := a2acard.ToAgent(card, b.CardURL)
	if err != nil {
		refused(cardError(r.Context(), err))
		return
	}
	s.register(w, r.WithContext(audit.WithVia(r.Context(), "import")), a)
}

// checkCardURL checks the shape of a card URL and the rules of the endpoint
// policy that need no configuration (scheme, userinfo, always-refused
// hosts); the card client applies the configured policy when it connects.
func checkCardURL(raw string) *apiError {
	switch {
	case raw == "":
		return fieldError("cardUrl", "the cardUrl field is required")
	case len(raw) > registry.MaxEndpointLen:
		return fieldError("cardUrl", "invalid cardUrl: must be at most %d characters", registry.MaxEndpointLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return fieldError("cardUrl", "invalid cardUrl: must be an absolute http or https URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fieldError("cardUrl", "invalid cardUrl: scheme must be http or https")
	}
	if err := (*netguard.Policy)(nil).CheckURL(raw); err != nil {
		return refusedCardURL(err)
	}
	return nil
}

// refusedCardURL is the 400 endpoint_not_allowed of a card URL refused by
// the endpoint policy.
func refusedCardURL(err error) *apiError {
	rule := "refused by the endpoint policy"
	var re *netguard.RefusedError
	if errors.As(err, &re) {
		rule = re.Rule
	}
	e := errorf(http.StatusBadRequest, registry.CodeEndpointNotAllowed, "cardUrl refused: %s", rule)
	e.details = map[string]any{"fields": []FieldProblem{{Field: "cardUrl", Rule: rule, Code: registry.CodeEndpointNotAllowed}}}
	return e
}

// cardError maps an error of a2acard.Fetch to a response.
func cardError(ctx context.Context, err error) *apiError {
	switch {
	case errors.Is(err, netguard.ErrNotAllowed):
		return refusedCardURL(err)
	case ctx.Err() != nil:
		return describe(ctx.Err())
	}
	e := describe(err)
	if errors.Is(err, a2acard.ErrInvalidCard) {
		e.details = map[string]string{"field": "cardUrl"}
	}
	return e
}
