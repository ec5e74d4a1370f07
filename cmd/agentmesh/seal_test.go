package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadSecretKeys(t *testing.T) {
	a, b := newSealKey(t), newSealKey(t)
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	noEnv := func(string) string { return "" }
	envKey := func(v string) func(string) string {
		return func(k string) string {
			if k == "MESH_SECRET_KEY" {
				return v
			}
			return ""
		}
	}

	ring, err := readSecretKeys(secretConfig{}, noEnv, log)
	require.NoError(t, err)
	assert.Nil(t, ring, "no key: credentials in clear")

	ring, err = readSecretKeys(secretConfig{}, envKey(b.b64()+", "+a.b64()), log)
	require.NoError(t, err)
	assert.Equal(t, []string{b.id(), a.id()}, ring.KeyIDs(), "MESH_SECRET_KEY takes a comma-separated ring")

	ring, err = readSecretKeys(secretConfig{keyFile: keyFile(t, a, b)}, noEnv, log)
	require.NoError(t, err)
	assert.Equal(t, []string{a.id(), b.id()}, ring.KeyIDs())
	assert.Empty(t, logged.String(), "a 0600 file is not warned about")

	_, err = readSecretKeys(secretConfig{keyFile: keyFile(t, a)}, envKey(a.b64()), log)
	assert.ErrorContains(t, err, "not both")

	_, err = readSecretKeys(secretConfig{}, envKey("c2hvcnQ="), log)
	assert.ErrorContains(t, err, "MESH_SECRET_KEY: sealstore: line 1: the key is 5 bytes, want 32")

	bad := filepath.Join(t.TempDir(), "bad.keys")
	require.NoError(t, os.WriteFile(bad, []byte("# ok\n"+a.b64()+"\nnot a key\n"), 0o600))
	_, err = readSecretKeys(secretConfig{keyFile: bad}, noEnv, log)
	require.ErrorContains(t, err, "--secret-key-file "+bad+": sealstore: line 3:")
	assert.NotContains(t, err.Error(), a.b64())

	big := filepath.Join(t.TempDir(), "big.keys")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("#\n", maxKeyFile)), 0o600))
	_, err = readSecretKeys(secretConfig{keyFile: big}, noEnv, log)
	assert.ErrorContains(t, err, "larger than 64 KiB")

	_, err = readSecretKeys(secretConfig{keyFile: filepath.Join(t.TempDir(), "missing")}, noEnv, log)
	assert.ErrorContains(t, err, "--secret-key-file")

	open := keyFile(t, a)
	require.NoError(t, os.Chmod(open, 0o644))
	_, err = readSecretKeys(secretConfig{keyFile: open}, noEnv, log)
	require.NoError(t, err)
	assert.Contains(t, logged.String(), "readable by other users")
}

func TestLoadSecretKeysWarnsOnce(t *testing.T) {
	var logged bytes.Buffer
	cfg := meshConfig{log: slog.New(slog.NewTextHandler(&logged, nil))}
	noEnv := func(string) string { return "" }
	_, err := loadSecretKeys(cfg, noEnv)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(logged.String(), clearTextLog))

	logged.Reset()
	cfg.store = "memory"
	_, err = loadSecretKeys(cfg, noEnv)
	require.NoError(t, err)
	assert.NotContains(t, logged.String(), clearTextLog, "nothing is at rest in memory")

	logged.Reset()
	cfg.store, cfg.secrets.keyFile = "bolt", keyFile(t, newSealKey(t))
	_, err = loadSecretKeys(cfg, noEnv)
	require.NoError(t, err)
	assert.NotContains(t, logged.String(), clearTextLog)
	assert.Contains(t, logged.String(), "agent credentials are sealed in the store")
}

// TestE2EAdminUsage: admin and admin rekey refuse what they cannot do,
// with the exit codes of usage errors (2) and failures (1).
func TestE2EAdminUsage(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "", "admin")
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "rekey")
	r = runCLI(t, nil, "", "admin", "frobnicate")
	assert.Equal(t, 2, r.code, "%s", r)
	r = runCLI(t, nil, "", "admin", "rekey", "--help")
	assert.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "stop agentmesh serve")
	assert.Contains(t, r.stderr, "$MESH_SECRET_KEY_FILE")
	db := filepath.Join(t.TempDir(), "none.db")
	r = runCLI(t, nil, "", "admin", "rekey", "--db", db)
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "no key")
	r = runCLI(t, []string{"MESH_SECRET_KEY=" + newSealKey(t).b64()}, "", "admin", "rekey", "--db", db)
	assert.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "no such store")
	_, err := os.Stat(db)
	assert.ErrorIs(t, err, os.ErrNotExist, "rekey creates no store")
	r = runCLI(t, []string{"MESH_SECRET_KEY=" + newSealKey(t).b64()}, "", "admin", "rekey", "--store", "memory")
	assert.Equal(t, 1, r.code, "%s", r)
	r = runCLI(t, nil, "", "--help")
	assert.Contains(t, r.stdout, "admin rekey")
	assert.Contains(t, helpFlags(r.stdout)["secret-key-file"], "$MESH_SECRET_KEY_FILE")
}
