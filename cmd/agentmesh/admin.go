package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/sealstore"
)

const adminUsage = `Usage: agentmesh admin COMMAND [flags]

Commands that work on the store directly:
  rekey    seal every agent credential with the first key of the key ring

Run "agentmesh admin COMMAND -h" for the flags of a command.
`

const rekeySynopsis = `agentmesh admin rekey [flags]

Seals every agent credential in the store with the first key of the key
ring (--secret-key-file or MESH_SECRET_KEY): credentials stored in clear
text and those sealed with another key of the ring are sealed anew, and
the number of records re-sealed is printed. Running it again re-seals
nothing once every credential is sealed with the first key; only then may
the older keys leave the ring.

A bbolt store (--db) is opened directly: stop agentmesh serve and every
other agentmesh on the file first (rekey fails while one holds it). An
etcd store (--store etcd) is rekeyed while the replicas run: each record
is rewritten with a compare-and-set, so concurrent writes are not lost,
but every replica must already have the ring's first key in its own ring.`

// runAdmin runs `agentmesh admin COMMAND`.
func runAdmin(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	switch args[0] {
	case "rekey":
		return runRekey(ctx, args[1:], env, stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, adminUsage)
		return 0
	}
	fmt.Fprintf(stderr, "agentmesh admin: unknown command %q\n\n%s", args[0], adminUsage)
	return 2
}

// runRekey runs `agentmesh admin rekey`.
func runRekey(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	var cfg meshConfig
	var logLevel string
	f := newFlags("admin rekey", rekeySynopsis, stderr)
	storeFlags(f, &cfg)
	f.String(&logLevel, "log-level", "MESH_LOG_LEVEL", "warn", "debug, info, warn or error (logs go to stderr)")
	if err := f.parse(args, env); err != nil {
		return usageError(stderr, err)
	}
	if f.fs.NArg() > 0 {
		return usageError(stderr, fmt.Errorf("admin rekey takes no arguments, got %q", f.fs.Args()))
	}
	log, err := newLogger(stderr, logLevel, "text", "text")
	if err != nil {
		return usageError(stderr, err)
	}
	cfg.log = log
	cfg.etcd.password = env("MESH_ETCD_PASSWORD")
	ring, err := readSecretKeys(cfg.secrets, env, log)
	if err == nil && ring == nil {
		err = errors.New("no key: give the key ring in --secret-key-file (MESH_SECRET_KEY_FILE) or MESH_SECRET_KEY")
	}
	if err != nil {
		return usageError(stderr, err)
	}
	res, err := rekey(ctx, cfg, ring)
	// The counts, unless the store could not be read at all.
	if err == nil || errors.Is(err, sealstore.ErrUnknownKey) || errors.Is(err, sealstore.ErrCorrupt) {
		fmt.Fprintf(stdout, "re-sealed %s with key %s (%d in clear text before); %d already sealed with it; %s\n",
			plural(res.Resealed, "agent credential"), ring.KeyID(), res.Cleartext, res.Current, plural(res.NoCredential, "agent")+" without a credential")
	}
	if err != nil {
		fmt.Fprintln(stderr, "agentmesh admin rekey:", err)
		return 1
	}
	return 0
}

// rekey opens the store cfg names, for writing, and re-seals it with ring.
func rekey(ctx context.Context, cfg meshConfig, ring *sealstore.Keyring) (sealstore.RekeyResult, error) {
	var store registry.Store
	switch cfg.store {
	case "", "bolt":
		path, err := dbPath(cfg.db)
		if err != nil {
			return sealstore.RekeyResult{}, err
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return sealstore.RekeyResult{}, fmt.Errorf("--db %s: no such store", path)
		}
		s, err := boltstore.Open(path, &boltstore.Options{Timeout: lockWait, Logger: cfg.log})
		if errors.Is(err, boltstore.ErrLocked) {
			return sealstore.RekeyResult{}, fmt.Errorf("%s is in use: stop agentmesh serve and every other agentmesh on it, then run rekey again", path)
		}
		if err != nil {
			return sealstore.RekeyResult{}, err
		}
		defer s.Close()
		store = s
	case "etcd":
		s, err := openEtcd(ctx, cfg)
		if err != nil {
			return sealstore.RekeyResult{}, err
		}
		defer s.Close()
		store = s
	case "memory":
		return sealstore.RekeyResult{}, errors.New("--store memory: nothing is stored to rekey")
	default:
		return sealstore.RekeyResult{}, fmt.Errorf("--store %q: must be bolt or etcd", cfg.store)
	}
	return sealstore.Rekey(ctx, store, ring)
}
