package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/routing"
)

// identityConfig configures the identity resolution of routed requests,
// a setting of both servers.
type identityConfig struct {
	file        string // --identities
	slackToken  string // --slack-token, SLACK_BOT_TOKEN (better: flags show in ps)
	slackAPIURL string
	slackField  string
}

// identityFlags declares the identity flags on f.
func identityFlags(f *flags, cfg *identityConfig) {
	f.String(&cfg.file, "identities", "MESH_IDENTITIES_FILE", "", "YAML or JSON list of {slack_user_id, user_id, email, employee_id, display_name} resolving the users of routed requests; reloaded on SIGHUP and POST /v1/admin/reload")
	f.String(&cfg.slackToken, "slack-token", "SLACK_BOT_TOKEN", "", "Slack bot token (users:read) resolving slack_user_id with users.info; prefer the environment variable, as a flag shows in ps")
	f.String(&cfg.slackAPIURL, "slack-api-url", "MESH_SLACK_API_URL", routing.DefaultSlackAPIURL, "Slack Web API root for resolving slack_user_id with users.info; used when SLACK_BOT_TOKEN is set")
	f.String(&cfg.slackField, "slack-employee-field", "MESH_SLACK_EMPLOYEE_FIELD", "", "Slack profile field holding the employee id: a custom field id (Xf…) or a standard profile key (email, title…); empty means Slack gives display names only")
}

// Names of the resolvers, the resolver label of
// agentmesh_identity_failures_total.
const (
	resolverDirectory = "directory"
	resolverSlack     = "slack"
)

// identities is the identity resolution of a mesh: the identities file,
// then Slack (behind a cache), whichever are configured. Build it once
// per process with newIdentities, before the mesh.
type identities struct {
	path     string
	dir      *routing.IdentityDirectory // nil without --identities
	resolver routing.IdentityResolver   // nil when nothing is configured
	failures *prometheus.CounterVec     // nil without metrics
	log      *slog.Logger

	mu      sync.Mutex
	lastErr error // of the last reload
}

// newIdentities builds the resolvers cfg configures, checking their URLs
// against the endpoint policy of mc, and registers the failure counter on
// reg (nil for none). It returns nil when nothing is configured. A file
// that does not load is an error.
func newIdentities(cfg identityConfig, mc meshConfig, reg *prometheus.Registry, log *slog.Logger) (*identities, error) {
	if cfg.file == "" && cfg.slackToken == "" {
		if cfg.slackField != "" {
			return nil, errors.New("--slack-employee-field needs SLACK_BOT_TOKEN")
		}
		return nil, nil
	}
	ids := &identities{path: cfg.file, log: log}
	var chain []routing.IdentityResolver
	var names []string
	if cfg.file != "" {
		entries, err := readIdentities(cfg.file)
		if err != nil {
			return nil, err
		}
		if ids.dir, err = routing.NewIdentityDirectory(entries); err != nil {
			return nil, fmt.Errorf("--identities %s: %w", cfg.file, err)
		}
		chain = append(chain, namedResolver{resolverDirectory, ids.dir})
		names = append(names, resolverDirectory)
	}
	if cfg.slackToken != "" {
		policy, err := netguard.NewPolicy(netguard.Options{AllowPrivate: mc.allowPrivate, AllowHosts: mc.allowHosts, Hint: privateHint})
		if err != nil {
			return nil, fmt.Errorf("--allow-endpoint-hosts: %w", err)
		}
		slack, err := routing.NewSlackIdentity(&routing.SlackIdentityOptions{
			Token:         cfg.slackToken,
			APIURL:        cfg.slackAPIURL,
			EmployeeField: cfg.slackField,
			Policy:        policy,
		})
		if err != nil {
			return nil, fmt.Errorf("--slack-api-url: %w", err)
		}
		cached, err := routing.NewIdentityCache(slack, nil)
		if err != nil {
			return nil, err
		}
		chain = append(chain, namedResolver{resolverSlack, cached})
		names = append(names, resolverSlack)
	}
	ids.resolver = routing.IdentityChain(chain...)
	if reg != nil {
		ids.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_identity_failures_total",
			Help: "Routed requests whose user identity could not be resolved (they were routed with the identity they came with), by resolver.",
		}, []string{"resolver"})
		if err := reg.Register(ids.failures); err != nil {
			return nil, err
		}
		for _, n := range names {
			ids.failures.WithLabelValues(n)
		}
	}
	attrs := []any{"resolvers", strings.Join(names, ",")}
	if ids.dir != nil {
		attrs = append(attrs, "identities", ids.dir.Len())
	}
	log.Info("identity resolution", attrs...)
	return ids, nil
}

// readIdentities reads and parses the identities file.
func readIdentities(path string) ([]routing.IdentityEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--identities: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, routing.MaxIdentitiesFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("--identities: %w", err)
	}
	entries, err := routing.ParseIdentities(data)
	if err != nil {
		return nil, fmt.Errorf("--identities %s: %w", path, err)
	}
	return entries, nil
}

// reload reads the identities file again and returns its number of
// entries; on an error the previous entries stay in service. Without
// --identities it does nothing.
func (ids *identities) reload() (int, error) {
	if ids == nil || ids.dir == nil {
		return 0, nil
	}
	entries, err := readIdentities(ids.path)
	if err == nil {
		err = ids.dir.Replace(entries)
	}
	ids.mu.Lock()
	ids.lastErr = err
	ids.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(entries), nil
}

// lastError is the error of the last reload, nil if it succeeded.
func (ids *identities) lastError() error {
	if ids == nil {
		return nil
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return ids.lastErr
}

// failed is routing.RouterOptions.OnIdentityFailure: the failure counts
// for the resolver that failed (the router has logged it).
func (ids *identities) failed(_ context.Context, err error) {
	if ids.failures == nil {
		return
	}
	name := "unknown"
	var re *resolverError
	if errors.As(err, &re) {
		name = re.resolver
	}
	ids.failures.WithLabelValues(name).Inc()
}

// namedResolver tags the failures of a resolver with its name.
type namedResolver struct {
	name string
	routing.IdentityResolver
}

func (n namedResolver) ResolveIdentity(ctx context.Context, id routing.Identity) (routing.Identity, error) {
	got, err := n.IdentityResolver.ResolveIdentity(ctx, id)
	if err != nil && !errors.Is(err, routing.ErrIdentityNotFound) {
		err = &resolverError{resolver: n.name, err: err}
	}
	return got, err
}

// resolverError is a failure of the resolver it names.
type resolverError struct {
	resolver string
	err      error
}

func (e *resolverError) Error() string { return e.resolver + ": " + e.err.Error() }
func (e *resolverError) Unwrap() error { return e.err }
