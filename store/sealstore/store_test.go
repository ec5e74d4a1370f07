package sealstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentmesh/agentmesh/internal/harness/etcdtest"
	"github.com/agentmesh/agentmesh/internal/harness/logtest"
	"github.com/agentmesh/agentmesh/internal/harness/storetest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/boltstore"
	"github.com/agentmesh/agentmesh/store/etcdstore"
	"github.com/agentmesh/agentmesh/store/memstore"
	"github.com/agentmesh/agentmesh/store/sealstore"
)

// server is the etcd server of this package's tests, started by TestMain.
var server *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &server)) }

func newRing(t testing.TB, keys ...[]byte) *sealstore.Keyring {
	t.Helper()
	r, err := sealstore.NewKeyring(keys...)
	require.NoError(t, err)
	return r
}

func newKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, sealstore.KeySize)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

// closing is a wrapped store with its inner store's Close, so that the
// conformance suite also checks calls after Close.
type closing struct {
	registry.Store
	close func() error
}

func (c closing) Close() error { return c.close() }

type closingWatchable struct {
	registry.WatchableStore
	close func() error
}

func (c closingWatchable) Close() error { return c.close() }

func wrapClosing(inner registry.Store, ring *sealstore.Keyring, close func() error) registry.Store {
	s := sealstore.Wrap(inner, ring, nil)
	if ws, ok := s.(registry.WatchableStore); ok {
		return closingWatchable{ws, close}
	}
	return closing{s, close}
}

func openBolt(t testing.TB, path string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openEtcd(t testing.TB, prefix string) *etcdstore.Store {
	t.Helper()
	if prefix == "" {
		prefix = etcdtest.Prefix(t)
	}
	s, err := etcdstore.Open(t.Context(), &etcdstore.Options{Endpoints: server.Endpoints, Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformanceMemstore(t *testing.T) {
	ring := newRing(t, newKey(t))
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return wrapClosing(s, ring, s.Close)
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

func TestConformanceMemstoreWithoutKey(t *testing.T) {
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return wrapClosing(s, nil, s.Close)
	}, &storetest.Options{ErrClosed: memstore.ErrClosed})
}

func TestConformanceBoltstore(t *testing.T) {
	ring := newRing(t, newKey(t))
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
		s := openBolt(t, filepath.Join(t.TempDir(), "mesh.db"))
		return wrapClosing(s, ring, s.Close)
	}, &storetest.Options{ErrClosed: boltstore.ErrClosed})
}

func TestConformanceEtcd(t *testing.T) {
	ring := newRing(t, newKey(t))
	storetest.TestAgentStore(t, func(t *testing.T) registry.Store {
		s := openEtcd(t, "")
		w := wrapClosing(s, ring, s.Close)
		_, ok := w.(registry.WatchableStore)
		require.True(t, ok, "a wrapped etcd store is watchable")
		return w
	}, &storetest.Options{ErrClosed: etcdstore.ErrClosed})
}

func agent(name, token string) registry.Agent {
	return registry.Agent{
		Name: name, Description: "Agent " + name, Capabilities: []string{"x"},
		Endpoint: "https://" + name + ".example.com/task",
		Auth:     &registry.Auth{Type: registry.AuthBearer, Token: token},
	}
}

func put(t *testing.T, s registry.Store, a registry.Agent) {
	t.Helper()
	require.NoError(t, s.UpdateAgent(t.Context(), a.Name, func(*registry.Agent) (*registry.Agent, error) { return &a, nil }))
}

func storedToken(t *testing.T, s registry.Store, name string) string {
	t.Helper()
	a, err := s.GetAgent(t.Context(), name)
	require.NoError(t, err)
	return a.Auth.Token
}

// TestBoltFileHoldsNoCredential: the bytes of the bbolt file hold the
// sealed value, never the credential; without a key they hold the
// credential (so the search can find it).
func TestBoltFileHoldsNoCredential(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		canary := "canary-" + rand.Text()
		path := filepath.Join(t.TempDir(), "mesh.db")
		inner, err := boltstore.Open(path, nil)
		require.NoError(t, err)
		var ring *sealstore.Keyring
		if sealed {
			ring = newRing(t, newKey(t))
		}
		s := sealstore.Wrap(inner, ring, nil)
		put(t, s, agent("billing", canary))
		assert.Equal(t, canary, storedToken(t, s, "billing"))
		require.NoError(t, inner.Close())

		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if sealed {
			assert.False(t, bytes.Contains(data, []byte(canary)), "the file holds the credential in clear")
			assert.True(t, bytes.Contains(data, []byte("sealed:v1:"+ring.KeyID()+":")), "the file holds the sealed value")
		} else {
			assert.True(t, bytes.Contains(data, []byte(canary)), "without a key the credential is in the file")
		}
	}
}

// TestEtcdValuesHoldNoCredential: the raw values under the store's prefix,
// read with a plain etcd client, hold the sealed value only.
func TestEtcdValuesHoldNoCredential(t *testing.T) {
	canary := "canary-" + rand.Text()
	prefix := etcdtest.Prefix(t)
	ring := newRing(t, newKey(t))
	s := sealstore.Wrap(openEtcd(t, prefix), ring, nil)
	put(t, s, agent("billing", canary))
	assert.Equal(t, canary, storedToken(t, s, "billing"))

	cli, err := clientv3.New(clientv3.Config{Endpoints: server.Endpoints, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	require.NotEmpty(t, resp.Kvs)
	var sawSealed bool
	for _, kv := range resp.Kvs {
		assert.NotContains(t, string(kv.Value), canary, "key %s", kv.Key)
		sawSealed = sawSealed || strings.Contains(string(kv.Value), "sealed:v1:"+ring.KeyID()+":")
	}
	assert.True(t, sawSealed, "some value holds the sealed credential")
}

func TestClearRecordsAreRead(t *testing.T) {
	inner := memstore.New()
	defer inner.Close()
	put(t, inner, agent("old", "clear-token"))
	s := sealstore.Wrap(inner, newRing(t, newKey(t)), nil)
	assert.Equal(t, "clear-token", storedToken(t, s, "old"))
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "clear-token", list[0].Auth.Token)

	// Its next write seals it.
	require.NoError(t, s.UpdateAgent(t.Context(), "old", func(cur *registry.Agent) (*registry.Agent, error) {
		assert.Equal(t, "clear-token", cur.Auth.Token)
		next := cur.Clone()
		next.Description = "changed"
		return &next, nil
	}))
	assert.True(t, sealstore.IsSealed(storedToken(t, inner, "old")))
	assert.Equal(t, "clear-token", storedToken(t, s, "old"))
}

func TestUnknownKeyFailsReadsAndWrites(t *testing.T) {
	inner := memstore.New()
	defer inner.Close()
	a, b := newKey(t), newKey(t)
	put(t, sealstore.Wrap(inner, newRing(t, a), nil), agent("billing", "s3cret"))
	sealed := storedToken(t, inner, "billing")

	for _, ring := range []*sealstore.Keyring{newRing(t, b), nil} {
		s := sealstore.Wrap(inner, ring, nil)
		_, err := s.GetAgent(t.Context(), "billing")
		require.ErrorIs(t, err, sealstore.ErrUnknownKey)
		assert.Contains(t, err.Error(), sealstore.KeyID(a))
		_, err = s.ListAgents(t.Context())
		require.ErrorIs(t, err, sealstore.ErrUnknownKey)
		called := false
		err = s.UpdateAgent(t.Context(), "billing", func(cur *registry.Agent) (*registry.Agent, error) {
			called = true
			return nil, nil
		})
		require.ErrorIs(t, err, sealstore.ErrUnknownKey)
		assert.False(t, called, "fn must not see a record that did not open")
		assert.Equal(t, sealed, storedToken(t, inner, "billing"), "nothing written")

		// A registry does not load over it.
		_, err = registry.New(t.Context(), s, &registry.Options{SweepInterval: -1})
		require.ErrorIs(t, err, sealstore.ErrUnknownKey)
	}
}

func TestSealedValueBoundToItsAgent(t *testing.T) {
	inner := memstore.New()
	defer inner.Close()
	s := sealstore.Wrap(inner, newRing(t, newKey(t)), nil)
	put(t, s, agent("billing", "s3cret"))
	moved := agent("payroll", storedToken(t, inner, "billing"))
	put(t, inner, moved)
	_, err := s.GetAgent(t.Context(), "payroll")
	assert.ErrorIs(t, err, sealstore.ErrCorrupt)
}

func TestWithoutKeyRefusesSealedLookingToken(t *testing.T) {
	inner := memstore.New()
	defer inner.Close()
	s := sealstore.Wrap(inner, nil, nil)
	a := agent("billing", "sealed:v1:00000000:AAAA")
	err := s.UpdateAgent(t.Context(), a.Name, func(*registry.Agent) (*registry.Agent, error) { return &a, nil })
	require.ErrorIs(t, err, registry.ErrInvalid)
	_, err = inner.GetAgent(t.Context(), "billing")
	require.ErrorIs(t, err, registry.ErrNotFound)

	// With a key the same token is a credential like any other.
	s = sealstore.Wrap(inner, newRing(t, newKey(t)), nil)
	put(t, s, a)
	assert.Equal(t, a.Auth.Token, storedToken(t, s, "billing"))
}

// TestUnchangedCredentialKeepsItsSealedValue: a write that does not change
// the credential (a heartbeat) keeps the stored value; a new token or a
// new first key seals anew; fn's result is not modified.
func TestUnchangedCredentialKeepsItsSealedValue(t *testing.T) {
	inner := memstore.New()
	defer inner.Close()
	a, b := newKey(t), newKey(t)
	s := sealstore.Wrap(inner, newRing(t, a), nil)
	put(t, s, agent("billing", "s3cret"))
	first := storedToken(t, inner, "billing")

	touch := func(s registry.Store, token string) {
		t.Helper()
		var returned *registry.Agent
		require.NoError(t, s.UpdateAgent(t.Context(), "billing", func(cur *registry.Agent) (*registry.Agent, error) {
			next := cur.Clone()
			next.LastSeen = time.Now()
			next.Auth.Token = token
			returned = &next
			return &next, nil
		}))
		assert.Equal(t, token, returned.Auth.Token, "the caller's record stays in clear")
	}
	touch(s, "s3cret")
	assert.Equal(t, first, storedToken(t, inner, "billing"))
	touch(s, "n3w")
	changed := storedToken(t, inner, "billing")
	assert.NotEqual(t, first, changed)
	assert.Equal(t, "n3w", storedToken(t, s, "billing"))

	rotated := sealstore.Wrap(inner, newRing(t, b, a), nil)
	touch(rotated, "n3w")
	id, _ := sealstore.SealedKeyID(storedToken(t, inner, "billing"))
	assert.Equal(t, sealstore.KeyID(b), id, "the new first key seals")
}

func TestRekey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.db")
	inner := openBolt(t, path)
	a, b := newKey(t), newKey(t)
	put(t, inner, agent("clear", "clear-token"))
	put(t, sealstore.Wrap(inner, newRing(t, a), nil), agent("sealed-a", "token-a"))
	noCred := agent("none", "")
	noCred.Auth = nil
	put(t, inner, noCred)

	res, err := sealstore.Rekey(t.Context(), inner, newRing(t, b, a))
	require.NoError(t, err)
	assert.Equal(t, sealstore.RekeyResult{Resealed: 2, Cleartext: 1, NoCredential: 1}, res)

	res, err = sealstore.Rekey(t.Context(), inner, newRing(t, b, a))
	require.NoError(t, err)
	assert.Equal(t, sealstore.RekeyResult{Current: 2, NoCredential: 1}, res, "a second run has nothing to do")

	onlyB := sealstore.Wrap(inner, newRing(t, b), nil)
	assert.Equal(t, "clear-token", storedToken(t, onlyB, "clear"))
	assert.Equal(t, "token-a", storedToken(t, onlyB, "sealed-a"))
	_, err = sealstore.Wrap(inner, newRing(t, a), nil).GetAgent(t.Context(), "sealed-a")
	require.ErrorIs(t, err, sealstore.ErrUnknownKey)
	assert.Contains(t, err.Error(), sealstore.KeyID(b))

	// The bucket holds no credential in clear any more.
	require.NoError(t, inner.Close())
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	values := 0
	require.NoError(t, db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bbolt.Bucket) error {
			return walk(bk, func(v []byte) {
				values++
				assert.NotContains(t, string(v), "clear-token", "bucket %s", name)
				assert.NotContains(t, string(v), "token-a", "bucket %s", name)
			})
		})
	}))
	assert.Positive(t, values)
}

// walk calls fn with every value of bk and of its nested buckets.
func walk(bk *bbolt.Bucket, fn func([]byte)) error {
	return bk.ForEach(func(k, v []byte) error {
		if v == nil {
			return walk(bk.Bucket(k), fn)
		}
		fn(v)
		return nil
	})
}

func TestRekeyReportsRecordsItCannotOpen(t *testing.T) {
	inner := memstore.New()
	defer inner.Close()
	a, c := newKey(t), newKey(t)
	put(t, sealstore.Wrap(inner, newRing(t, c), nil), agent("lost", "x"))
	put(t, inner, agent("clear", "y"))
	lost := storedToken(t, inner, "lost")

	res, err := sealstore.Rekey(t.Context(), inner, newRing(t, a))
	require.ErrorIs(t, err, sealstore.ErrUnknownKey)
	assert.Contains(t, err.Error(), sealstore.KeyID(c))
	assert.Equal(t, sealstore.RekeyResult{Resealed: 1, Cleartext: 1}, res, "the other records are done")
	assert.Equal(t, lost, storedToken(t, inner, "lost"), "left as it is")

	_, err = sealstore.Rekey(t.Context(), inner, nil)
	assert.ErrorIs(t, err, sealstore.ErrNoKey)
}

// TestWatchOpensChanges: over etcd, a replica's watch reports the
// credentials another replica wrote in clear, and leaves out a record
// sealed with a key it does not hold.
func TestWatchOpensChanges(t *testing.T) {
	prefix := etcdtest.Prefix(t)
	a, b := newKey(t), newKey(t)
	writer := sealstore.Wrap(openEtcd(t, prefix), newRing(t, a), nil)
	put(t, writer, agent("first", "token-1"))

	var logs logtest.Buffer
	reader, ok := sealstore.Wrap(openEtcd(t, prefix), newRing(t, a),
		&sealstore.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}).(registry.WatchableStore)
	require.True(t, ok)
	var mu sync.Mutex
	var got []registry.AgentChanges
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- reader.WatchAgents(ctx, func(c registry.AgentChanges) {
			mu.Lock()
			got = append(got, c)
			mu.Unlock()
		})
	}()
	tokens := func() map[string]string {
		mu.Lock()
		defer mu.Unlock()
		m := map[string]string{}
		for _, b := range got {
			for _, ch := range b.Changes {
				if ch.Agent != nil {
					m[ch.Name] = ch.Agent.Auth.Token
				}
			}
		}
		return m
	}
	require.Eventually(t, func() bool { return tokens()["first"] == "token-1" }, 5*time.Second, 10*time.Millisecond)

	put(t, sealstore.Wrap(openEtcd(t, prefix), newRing(t, b), nil), agent("foreign", "token-b"))
	put(t, writer, agent("second", "token-2"))
	require.Eventually(t, func() bool { return tokens()["second"] == "token-2" }, 5*time.Second, 10*time.Millisecond)
	_, seen := tokens()["foreign"]
	assert.False(t, seen, "a record sealed with an unknown key is left out")
	logged := logs.String()
	assert.Contains(t, logged, "level=ERROR", "and logged")
	assert.Contains(t, logged, "agent=foreign")
	assert.Contains(t, logged, sealstore.KeyID(b), "naming the key id")
	assert.NotContains(t, logged, "token-b")
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)

	rev, err := reader.UpdateAgentRevision(t.Context(), "second", func(cur *registry.Agent) (*registry.Agent, error) {
		assert.Equal(t, "token-2", cur.Auth.Token)
		next := cur.Clone()
		return &next, nil
	})
	require.NoError(t, err)
	assert.Positive(t, rev)
}
