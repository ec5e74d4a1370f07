package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentmesh/agentmesh/breaker"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// store is what the mesh needs from a storage backend: every consumer
// package's Store interface, and Close.
type store interface {
	registry.Store
	delegation.Store
	breaker.Store
	Close() error
}

var (
	_ store = (*boltstore.Store)(nil)
	_ store = (*memstore.Store)(nil)
)

// meshConfig is the configuration shared by `serve` and the stdio MCP
// server.
type meshConfig struct {
	store        string // bolt | memory | etcd
	db           string
	allowPrivate bool
	allowHosts   []string
	publicURL    string
	log          *slog.Logger
}

// mesh is the library wired together: one store, the registry, the
// discovery index following it, the breakers and the delegation client.
type mesh struct {
	store      store
	reg        *registry.Registry
	engine     *discovery.Engine
	breakers   *breaker.Set
	delegation *delegation.Client
	stopIndex  func()
}

func openStore(kind, db string, log *slog.Logger) (store, error) {
	switch kind {
	case "", "bolt":
		path, err := dbPath(db)
		if err != nil {
			return nil, err
		}
		s, err := boltstore.Open(path, &boltstore.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
		log.Info("store opened", "store", "bolt", "path", path)
		return s, nil
	case "memory":
		log.Warn("memory store: nothing is persisted")
		return memstore.New(), nil
	case "etcd":
		return nil, errors.New("--store etcd is not available in this build yet; use bolt or memory")
	default:
		return nil, fmt.Errorf("--store %q: must be bolt, memory or etcd", kind)
	}
}

// dbPath is --db, else $AGENTMESH_DB (already applied to the flag), else
// ~/.agentmesh/mesh.db.
func dbPath(db string) (string, error) {
	if db != "" {
		return db, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --db given and no home directory: %w", err)
	}
	return filepath.Join(home, ".agentmesh", "mesh.db"), nil
}

func openMesh(ctx context.Context, cfg meshConfig) (m *mesh, err error) {
	policy, err := netguard.NewPolicy(netguard.Options{AllowPrivate: cfg.allowPrivate, AllowHosts: cfg.allowHosts})
	if err != nil {
		return nil, fmt.Errorf("--allow-endpoint-hosts: %w", err)
	}
	st, err := openStore(cfg.store, cfg.db, cfg.log)
	if err != nil {
		return nil, err
	}
	m = &mesh{store: st}
	// "return nil, err" sets m to nil before deferred calls run: close
	// what was built through its own variable.
	built := m
	defer func() {
		if err != nil {
			built.close(context.Background())
		}
	}()

	m.reg, err = registry.New(ctx, st, &registry.Options{Policy: policy, Logger: cfg.log})
	if err != nil {
		return nil, err
	}
	m.breakers = breaker.NewSet(st, &breaker.Options{Logger: cfg.log})
	if err := m.breakers.Restore(ctx); err != nil {
		cfg.log.Warn("some breaker states could not be restored", "err", err)
	}
	m.engine = discovery.New(&discovery.Options{
		Available: func(name string) bool { return m.breakers.Get(name).State() != breaker.StateOpen },
	})
	m.stopIndex = m.engine.Follow(m.reg)
	m.delegation, err = delegation.New(ctx, m.reg, st, &delegation.Options{
		Discovery: m.engine,
		Breakers:  m.breakers,
		Policy:    policy,
		PublicURL: cfg.publicURL,
		Logger:    cfg.log,
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// close drains in-flight delegations until ctx is done, then closes
// everything in reverse order of opening.
func (m *mesh) close(ctx context.Context) error {
	var errs []error
	if m.delegation != nil {
		errs = append(errs, m.delegation.Shutdown(ctx))
	}
	if m.stopIndex != nil {
		m.stopIndex()
	}
	if m.reg != nil {
		errs = append(errs, m.reg.Close())
	}
	errs = append(errs, m.store.Close())
	return errors.Join(errs...)
}
