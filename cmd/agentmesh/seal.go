package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/agentmesh/agentmesh/store/sealstore"
)

// secretConfig is where the key ring sealing the agents' credentials in
// the store comes from: --secret-key-file, or MESH_SECRET_KEY (read from
// the environment only, never a flag, as it holds the key itself).
type secretConfig struct {
	keyFile string // --secret-key-file
}

// maxKeyFile bounds what is read of a key file: a few hundred keys.
const maxKeyFile = 64 << 10

// secretFlags declares the flag of the key ring.
func secretFlags(f *flags, c *secretConfig) {
	f.String(&c.keyFile, "secret-key-file", "MESH_SECRET_KEY_FILE", "",
		"file of AES-256 keys sealing the agents' credentials in the store: one standard-base64 32-byte key a line (openssl rand -base64 32), # comments; the first seals, every key opens. Or the key(s), comma-separated, in MESH_SECRET_KEY")
}

// clearTextWarning is logged once at startup by the commands that write
// the store without a key.
const clearTextWarning = "agent credentials are stored in clear text: give --secret-key-file (MESH_SECRET_KEY_FILE) or MESH_SECRET_KEY to seal them, then run agentmesh admin rekey"

// loadSecretKeys returns the key ring of --secret-key-file or
// MESH_SECRET_KEY, nil when neither is given: then, for a store that
// persists (any but memory), it logs once that credentials are stored in
// clear text.
func loadSecretKeys(cfg meshConfig, env func(string) string) (*sealstore.Keyring, error) {
	ring, err := readSecretKeys(cfg.secrets, env, cfg.log)
	switch {
	case err != nil:
		return nil, err
	case ring != nil:
		cfg.log.Info("agent credentials are sealed in the store", "key_id", ring.KeyID(), "keys", len(ring.KeyIDs()))
	case cfg.store != "memory":
		cfg.log.Warn(clearTextWarning)
	}
	return ring, nil
}

// readSecretKeys reads the key ring c and env describe; nil for none.
func readSecretKeys(c secretConfig, env func(string) string, log *slog.Logger) (*sealstore.Keyring, error) {
	inline := env("MESH_SECRET_KEY")
	switch {
	case c.keyFile != "" && inline != "":
		return nil, errors.New("give --secret-key-file (MESH_SECRET_KEY_FILE) or MESH_SECRET_KEY, not both")
	case inline != "":
		ring, err := sealstore.ParseKeyring([]byte(strings.ReplaceAll(inline, ",", "\n")))
		if err != nil {
			return nil, fmt.Errorf("MESH_SECRET_KEY: %w", err)
		}
		return ring, nil
	case c.keyFile == "":
		return nil, nil
	}
	f, err := os.Open(c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the secret key file is readable by other users: chmod 600 it", "path", c.keyFile, "mode", fi.Mode().Perm().String())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file: %w", err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("--secret-key-file %s: larger than %d KiB", c.keyFile, maxKeyFile>>10)
	}
	ring, err := sealstore.ParseKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file %s: %w", c.keyFile, err)
	}
	return ring, nil
}
