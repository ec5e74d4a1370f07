package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/store/etcdstore"
	"github.com/agentmesh/agentmesh/store/sealstore"
)

// sealKey is one key of a test's key ring.
type sealKey []byte

func newSealKey(t *testing.T) sealKey {
	t.Helper()
	k := make([]byte, sealstore.KeySize)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

func (k sealKey) b64() string { return base64.StdEncoding.EncodeToString(k) }
func (k sealKey) id() string  { return sealstore.KeyID(k) }

// keyFile writes a key file of keys (the first seals), as an operator
// would: a comment, one key a line, mode 0600.
func keyFile(t *testing.T, keys ...sealKey) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# agentmesh secret keys: the first seals, all open\n")
	for _, k := range keys {
		b.WriteString(k.b64() + "  # " + k.id() + "\n")
	}
	return writeTemp(t, "secret.keys", b.String())
}

// authOf returns the Authorization header with which the agents got task.
func authOf(ag *agents, task string) string {
	for _, r := range ag.requests() {
		if r.Task == task {
			return r.Authorization
		}
	}
	return ""
}

// registerWithToken registers name at the agent with a bearer credential.
func registerWithToken(t *testing.T, p *meshProc, name string, ag *agents, token string) {
	t.Helper()
	body := agentJSON(name, ag.url("/sync"), "billing", "invoices")
	body["auth"] = map[string]any{"type": "bearer", "token": token}
	r := p.client().do("POST", "/v1/agents", body)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
}

// delegatesWith delegates a task to name and requires the agent to have
// received the credential.
func delegatesWith(t *testing.T, p *meshProc, name string, ag *agents, token string) {
	t.Helper()
	task := "task for " + name + " " + rand.Text()
	r := p.client().do("POST", "/v1/delegate", map[string]any{"targetName": name, "task": task})
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	assert.Equal(t, "completed", r.obj(t)["status"], "%s", r)
	assert.Equal(t, "Bearer "+token, authOf(ag, task), "the agent gets its credential in clear")
}

// sealServe starts serve on db with the key ring env or file args give.
func sealServe(t *testing.T, db string, args []string, env ...string) *meshProc {
	t.Helper()
	return startServe(t, serveSpec{db: db, token: "t", args: append([]string{"--allow-private-endpoints"}, args...), env: env})
}

const clearTextLog = "agent credentials are stored in clear text"

func logs(p *meshProc, s string) bool { return strings.Contains(p.stderr.String(), s) }

// boltValues returns every value of every bucket of the bbolt file.
func boltValues(t *testing.T, path string) [][]byte {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	var out [][]byte
	var walk func(*bbolt.Bucket) error
	walk = func(bk *bbolt.Bucket) error {
		return bk.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(bk.Bucket(k))
			}
			out = append(out, bytes.Clone(v))
			return nil
		})
	}
	require.NoError(t, db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, bk *bbolt.Bucket) error { return walk(bk) })
	}))
	return out
}

func anyContains(values [][]byte, s string) bool {
	for _, v := range values {
		if bytes.Contains(v, []byte(s)) {
			return true
		}
	}
	return false
}

// TestE2ESealedCredentialsBolt: without a key, serve warns at startup and
// the bbolt file holds the credential in clear; with --secret-key-file it
// does not warn, the file holds only the sealed value of a new
// credential, the old clear record is still read, and both agents get
// their credentials on delegation; admin rekey then seals the clear one.
func TestE2ESealedCredentialsBolt(t *testing.T) {
	t.Parallel()
	ag := newAgents(t)
	db := filepath.Join(t.TempDir(), "mesh.db")
	legacy, canary := "legacy-"+rand.Text(), "canary-"+rand.Text()

	p := sealServe(t, db, nil)
	assert.True(t, logs(p, clearTextLog), "serve without a key warns:\n%s", p.stderr)
	registerWithToken(t, p, "legacy-agent", ag, legacy)
	p.stop()
	data, err := os.ReadFile(db)
	require.NoError(t, err)
	require.True(t, bytes.Contains(data, []byte(legacy)), "without a key the file holds the credential (the search below can find one)")

	keyA := newSealKey(t)
	keys := keyFile(t, keyA)
	p = sealServe(t, db, []string{"--secret-key-file", keys})
	assert.False(t, logs(p, clearTextLog), "serve with a key does not warn:\n%s", p.stderr)
	assert.True(t, logs(p, `"key_id":"`+keyA.id()+`"`), "serve logs the sealing key's id:\n%s", p.stderr)
	assert.False(t, logs(p, keyA.b64()), "never the key")
	registerWithToken(t, p, "billing-agent", ag, canary)
	delegatesWith(t, p, "billing-agent", ag, canary)
	delegatesWith(t, p, "legacy-agent", ag, legacy) // written before the key: read as it is
	p.stop()

	data, err = os.ReadFile(db)
	require.NoError(t, err)
	assert.False(t, bytes.Contains(data, []byte(canary)), "the bbolt file holds the credential in clear")
	assert.True(t, bytes.Contains(data, []byte("sealed:v1:"+keyA.id()+":")), "the bbolt file holds the sealed credential")
	require.True(t, anyContains(boltValues(t, db), legacy), "the record written before the key is still in clear")

	r := runCLI(t, nil, "", "admin", "rekey", "--db", db, "--secret-key-file", keys)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "re-sealed 1 agent credential with key "+keyA.id()+" (1 in clear text before); 1 already sealed with it")
	values := boltValues(t, db)
	assert.False(t, anyContains(values, legacy), "rekey sealed the clear record")
	assert.False(t, anyContains(values, canary))
	if data, err := os.ReadFile(db); err == nil && bytes.Contains(data, []byte(legacy)) {
		t.Log("the old clear bytes remain in free pages of the file after rekey (bbolt does not zero them)")
	}

	p = sealServe(t, db, nil, "MESH_SECRET_KEY_FILE="+keys)
	delegatesWith(t, p, "legacy-agent", ag, legacy)
	delegatesWith(t, p, "billing-agent", ag, canary)
	p.stop()
}

// TestE2EKeyRotation: sealed with key A; the ring B,A and admin rekey;
// with B alone the store still opens and delegates; with A alone serve
// refuses to start, naming B's key id and no key.
func TestE2EKeyRotation(t *testing.T) {
	t.Parallel()
	ag := newAgents(t)
	db := filepath.Join(t.TempDir(), "mesh.db")
	canary := "canary-" + rand.Text()
	keyA, keyB := newSealKey(t), newSealKey(t)

	p := sealServe(t, db, []string{"--secret-key-file", keyFile(t, keyA)})
	registerWithToken(t, p, "billing-agent", ag, canary)
	delegatesWith(t, p, "billing-agent", ag, canary)
	// A running serve holds the file: rekey refuses and says why.
	r := runCLI(t, nil, "", "admin", "rekey", "--db", db, "--secret-key-file", keyFile(t, keyB, keyA))
	assert.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "stop agentmesh serve")
	p.stop()

	both := keyFile(t, keyB, keyA)
	r = runCLI(t, nil, "", "admin", "rekey", "--db", db, "--secret-key-file", both)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "re-sealed 1 agent credential with key "+keyB.id()+" (0 in clear text before); 0 already sealed with it")
	r = runCLI(t, []string{"MESH_SECRET_KEY=" + keyB.b64() + "," + keyA.b64()}, "", "admin", "rekey", "--db", db)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "re-sealed 0 agent credentials with key "+keyB.id()+" (0 in clear text before); 1 already sealed with it")

	p = sealServe(t, db, []string{"--secret-key-file", keyFile(t, keyB)})
	delegatesWith(t, p, "billing-agent", ag, canary)
	p.stop()

	r = runCLI(t, nil, "", "serve", "--addr", "127.0.0.1:0", "--db", db, "--log-format", "json", "--secret-key-file", keyFile(t, keyA))
	assert.Equal(t, 1, r.code, "serve refuses a store it cannot open: %s", r)
	assert.Contains(t, r.stderr, "sealed with key "+keyB.id())
	assert.Contains(t, r.stderr, "the ring holds "+keyA.id())
	assert.Contains(t, r.stderr, "billing-agent")
	assert.NotContains(t, r.stderr, keyA.b64())
	assert.NotContains(t, r.stderr, keyB.b64())
	assert.NotContains(t, r.stderr, canary)

	// rekey with a ring that cannot open the record says so and changes nothing.
	r = runCLI(t, nil, "", "admin", "rekey", "--db", db, "--secret-key-file", keyFile(t, keyA))
	assert.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "sealed with key "+keyB.id())
}

// TestE2ESealedCredentialsEtcd: over etcd, the raw values under the
// store's prefix, read with a plain etcd client, hold no credential; a
// rekey to a new key while the replica runs (its ring already holds the
// new key) leaves it delegating with the credential.
func TestE2ESealedCredentialsEtcd(t *testing.T) {
	t.Parallel()
	endpoints := startEtcd(t)
	ag := newAgents(t)
	canary := "canary-" + rand.Text()
	keyA, keyB := newSealKey(t), newSealKey(t)
	etcdArgs := []string{"--store", "etcd", "--etcd-endpoints", endpoints}

	// A seals, B only opens: the first step of a rolling rotation.
	p := sealServe(t, "", etcdArgs, "MESH_SECRET_KEY="+keyA.b64()+","+keyB.b64())
	assert.False(t, logs(p, clearTextLog))
	registerWithToken(t, p, "billing-agent", ag, canary)
	delegatesWith(t, p, "billing-agent", ag, canary)

	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	rawHas := func(s string) bool {
		resp, err := cli.Get(t.Context(), etcdstore.DefaultPrefix, clientv3.WithPrefix())
		require.NoError(t, err)
		require.NotEmpty(t, resp.Kvs)
		for _, kv := range resp.Kvs {
			if bytes.Contains(kv.Value, []byte(s)) {
				return true
			}
		}
		return false
	}
	assert.False(t, rawHas(canary), "etcd holds the credential in clear")
	assert.True(t, rawHas("sealed:v1:"+keyA.id()+":"))

	r := runCLI(t, nil, "", append([]string{"admin", "rekey", "--secret-key-file", keyFile(t, keyB, keyA)}, etcdArgs...)...)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "re-sealed 1 agent credential with key "+keyB.id())
	assert.True(t, rawHas("sealed:v1:"+keyB.id()+":"))
	assert.False(t, rawHas("sealed:v1:"+keyA.id()+":"))
	assert.False(t, rawHas(canary))
	// The running replica follows the rewrite through its watch.
	require.Eventually(t, func() bool {
		task := "after rekey " + rand.Text()
		r := p.client().do("POST", "/v1/delegate", map[string]any{"targetName": "billing-agent", "task": task})
		return r.status == http.StatusOK && authOf(ag, task) == "Bearer "+canary
	}, 10*time.Second, 100*time.Millisecond)
	p.stop()
}

// TestE2EStdioSealsCredentials: the stdio MCP server, which holds the
// bbolt file itself, warns without a key and seals with MESH_SECRET_KEY;
// a serve on the same file reads the credential with the same key.
func TestE2EStdioSealsCredentials(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "stdio.db")
	ag := newAgents(t)
	canary := "canary-" + rand.Text()
	key := newSealKey(t)
	register := map[string]any{
		"name": "billing-agent", "description": "Bills.", "capabilities": []string{"billing"},
		"endpoint": ag.url("/sync"), "auth": map[string]any{"type": "bearer", "token": canary},
	}

	s := startStdio(t, nil, "--db", db, "--store", "bolt")
	require.Eventually(t, func() bool { return strings.Contains(s.stderr.String(), clearTextLog) }, 5*time.Second, 10*time.Millisecond,
		"the stdio server warns without a key:\n%s", s.stderr)
	s.close(t)

	s = startStdio(t, []string{"MESH_SECRET_KEY=" + key.b64()}, "--db", db)
	callTool(t, s.cs, "mesh_register", register)
	assert.NotContains(t, s.stderr.String(), clearTextLog)
	s.close(t)
	data, err := os.ReadFile(db)
	require.NoError(t, err)
	assert.False(t, bytes.Contains(data, []byte(canary)), "the bbolt file holds the credential in clear")
	assert.True(t, bytes.Contains(data, []byte("sealed:v1:"+key.id()+":")))

	p := sealServe(t, db, []string{"--secret-key-file", keyFile(t, key)})
	delegatesWith(t, p, "billing-agent", ag, canary)
	p.stop()
}
