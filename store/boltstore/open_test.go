package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/agentmesh/agentmesh/audit"
	"github.com/agentmesh/agentmesh/registry"
)

// testAgent returns a small agent record named name.
func testAgent(name string) registry.Agent {
	th := 0.7
	return registry.Agent{
		Name:                name,
		Description:         "Agent " + name + " handles budgets and cost centers.",
		Capabilities:        []string{"budget", "cost-center"},
		Endpoint:            "https://" + name + ".example.com/task",
		Protocol:            registry.ProtocolHTTP,
		Auth:                &registry.Auth{Type: registry.AuthBearer, Token: "tok-" + name},
		ConfidenceThreshold: &th,
		Labels:              map[string]string{"team": "finance"},
		RegisteredAt:        time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		Source:              registry.SourceAPI,
	}
}

// putAgent stores a under its name.
func putAgent(t testing.TB, s *Store, a registry.Agent) {
	t.Helper()
	require.NoError(t, storeAgent(t.Context(), s, a))
}

// storeAgent stores a under its name and returns the store's error.
func storeAgent(ctx context.Context, s *Store, a registry.Agent) error {
	return s.UpdateAgent(ctx, a.Name, func(*registry.Agent) (*registry.Agent, error) {
		return &a, nil
	})
}

// putJSON stores a in b under k, as the store encodes records.
func putJSON(b *bbolt.Bucket, k []byte, a registry.Agent) error {
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return b.Put(k, v)
}

// populated returns the bytes of a closed store holding n agents.
func populated(t *testing.T, n int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mesh.db")
	s, err := Open(path, nil)
	require.NoError(t, err)
	for i := range n {
		putAgent(t, s, testAgent(fmt.Sprintf("agent-%04d", i)))
	}
	require.NoError(t, s.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// highWaterMark returns the size the store in b needs: the end of its
// last page in use. bbolt grows files ahead of use, so the file is longer.
func highWaterMark(t *testing.T, b []byte) int {
	t.Helper()
	db, err := bbolt.Open(writeFile(t, b), 0o600, &bbolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	tx, err := db.Begin(false)
	require.NoError(t, err)
	defer tx.Rollback()
	require.Less(t, int(tx.Size()), len(b), "the test needs a file with unused pages at the end")
	return int(tx.Size())
}

// writeFile writes b to a new file and returns its path.
func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mesh.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// openBad opens path expecting an error wrapping want, and checks that the
// failed Open left the file exactly as it was.
func openBad(t *testing.T, path string, want error) error {
	t.Helper()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := Open(path, &Options{Timeout: -1})
	if s != nil {
		_ = s.Close()
	}
	require.Error(t, err)
	assert.ErrorIs(t, err, want)
	after, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	assert.True(t, bytes.Equal(before, after), "a failed Open must not change the file")
	return err
}

func TestOpenCreatesFileAndDirectories(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "mesh.db")
	s, err := Open(path, nil)
	require.NoError(t, err)
	putAgent(t, s, testAgent("finance"))
	require.NoError(t, s.Close())

	for _, d := range []string{filepath.Dir(dir), dir} {
		info, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), d)
	}
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file may be left behind")

	// The layout: every bucket, and the schema version.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bbolt.Tx) error {
		for _, b := range currentSchema().buckets {
			assert.NotNil(t, tx.Bucket(b), "bucket %s", b)
		}
		assert.Equal(t, strconv.Itoa(SchemaVersion), string(tx.Bucket(bucketMeta).Get(keySchemaVersion)))
		var stored registry.Agent
		require.NoError(t, decodeAgent("finance", tx.Bucket(bucketAgents).Get([]byte("finance")), &stored))
		assert.Equal(t, "tok-finance", stored.Auth.Token, "the store keeps the token")
		return nil
	}))
	assert.False(t, db.NoSync, "commits must be fsync'd")
}

func TestReopenKeepsRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.db")
	s, err := Open(path, nil)
	require.NoError(t, err)
	assert.False(t, s.db.NoSync, "commits must be fsync'd")
	for i := range 50 {
		putAgent(t, s, testAgent(fmt.Sprintf("agent-%02d", i)))
	}
	require.NoError(t, s.Close())

	s, err = Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 50)
	for i, a := range list {
		want := testAgent(fmt.Sprintf("agent-%02d", i))
		assert.Equal(t, want.Name, a.Name)
		assert.Equal(t, want.Auth.Token, a.Auth.Token)
		assert.True(t, want.RegisteredAt.Equal(a.RegisteredAt))
	}
}

func TestOpenLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.db")
	s, err := Open(path, nil)
	require.NoError(t, err)

	start := time.Now()
	_, err = Open(path, &Options{Timeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "Open must wait for the lock")
	assert.Contains(t, err.Error(), path)

	start = time.Now()
	_, err = Open(path, &Options{Timeout: -1})
	require.ErrorIs(t, err, ErrLocked)
	assert.Less(t, time.Since(start), time.Second, "a negative Timeout must not wait")

	// Released by Close; a waiting Open then succeeds.
	opened := make(chan error, 1)
	go func() {
		s2, err := Open(path, &Options{Timeout: 10 * time.Second})
		if err == nil {
			err = s2.Close()
		}
		opened <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, s.Close())
	require.NoError(t, <-opened)
}

func TestOpenDefaultTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.db")
	s, err := Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	start := time.Now()
	_, err = Open(path, nil)
	require.ErrorIs(t, err, ErrLocked)
	assert.InDelta(t, DefaultTimeout.Seconds(), time.Since(start).Seconds(), 0.5)
}

func TestOpenRefusesBadFiles(t *testing.T) {
	good := populated(t, 300)
	const pageSize = 4096
	require.Greater(t, len(good), 8*pageSize)
	rnd := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	corruptMeta := bytes.Clone(good)
	copy(corruptMeta[16:64], random(48))                   // meta page 0, past the page header
	copy(corruptMeta[pageSize+16:pageSize+64], random(48)) // meta page 1
	oneMeta := bytes.Clone(good)
	copy(oneMeta[16:64], random(48)) // only meta page 0: bbolt falls back to page 1
	corruptData := bytes.Clone(good)
	copy(corruptData[2*pageSize:], random(len(good)-2*pageSize))

	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"ZeroLength", nil, ErrNotStore},
		{"Text", []byte("name: finance\nendpoint: https://example.com\n"), ErrCorrupt},
		{"RandomSmall", random(100), ErrCorrupt},
		{"Random64KiB", random(64 << 10), ErrCorrupt},
		{"Zeros", make([]byte, 32<<10), ErrCorrupt},
		{"BothMetaPagesCorrupt", corruptMeta, ErrCorrupt},
		{"DataPagesCorrupt", corruptData, ErrCorrupt},
		{"TruncatedToHalf", good[:len(good)/2], ErrCorrupt},
		{"TruncatedToThreePages", good[:3*pageSize], ErrCorrupt},
		{"TruncatedInsideMetaPage", good[:pageSize+100], ErrCorrupt},
		{"TruncatedToOneByte", good[:1], ErrCorrupt},
		{"TruncatedBelowHighWaterMark", good[:highWaterMark(t, good)-pageSize], ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := openBad(t, writeFile(t, c.data), c.want)
			t.Log(err)
		})
	}

	t.Run("OneMetaPageCorrupt", func(t *testing.T) {
		// bbolt keeps two meta pages so that a torn meta write is survivable:
		// the other one is used, and nothing acknowledged is lost.
		s, err := Open(writeFile(t, oneMeta), nil)
		require.NoError(t, err)
		defer s.Close()
		list, err := s.ListAgents(t.Context())
		require.NoError(t, err)
		assert.NotEmpty(t, list)
	})

	t.Run("ShortenedButNothingInUseLost", func(t *testing.T) {
		// bbolt grows the file ahead of use; losing only unused pages at the
		// end loses nothing, so the store opens with every record.
		s, err := Open(writeFile(t, good[:highWaterMark(t, good)]), nil)
		require.NoError(t, err)
		defer s.Close()
		list, err := s.ListAgents(t.Context())
		require.NoError(t, err)
		assert.Len(t, list, 300)
		putAgent(t, s, testAgent("after"))
	})

	t.Run("Directory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mesh.db")
		require.NoError(t, os.Mkdir(path, 0o700))
		_, err := Open(path, nil)
		require.ErrorIs(t, err, ErrNotStore)
	})
}

// TestOpenSurvivesEveryDamagedPage overwrites each page of a store in turn
// and opens the result: Open must either refuse it with ErrCorrupt or, when
// the page was free, open it and read every record; it must never crash.
func TestOpenSurvivesEveryDamagedPage(t *testing.T) {
	good := populated(t, 200)
	const pageSize = 4096
	rnd := rand.New(rand.NewPCG(3, 4))
	pages := len(good) / pageSize
	refused := 0
	for p := 0; p < pages; p++ {
		for _, fill := range []string{"random", "zero"} {
			bad := bytes.Clone(good)
			page := bad[p*pageSize : (p+1)*pageSize]
			for i := range page {
				if fill == "random" {
					page[i] = byte(rnd.Uint32())
				} else {
					page[i] = 0
				}
			}
			path := writeFile(t, bad)
			s, err := Open(path, &Options{Timeout: -1})
			if err != nil {
				refused++
				require.ErrorIs(t, err, ErrCorrupt, "page %d (%s)", p, fill)
				continue
			}
			_, err = s.ListAgents(t.Context())
			if err != nil {
				assert.ErrorIs(t, err, ErrCorrupt, "page %d (%s)", p, fill)
			}
			err = s.UpdateAgent(t.Context(), "agent-0100", func(cur *registry.Agent) (*registry.Agent, error) {
				a := testAgent("agent-0100")
				return &a, nil
			})
			if err != nil {
				assert.ErrorIs(t, err, ErrCorrupt, "page %d (%s)", p, fill)
			}
			require.NoError(t, s.Close())
		}
	}
	t.Logf("%d pages, %d damaged files refused", pages, refused)
	assert.Positive(t, refused)
}

func TestOpenRefusesForeignBoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("widgets"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}))
	require.NoError(t, db.Close())
	openBad(t, path, ErrNotStore)
}

// setMeta rewrites the schema version of the closed store at path; a nil
// value deletes it.
func setMeta(t *testing.T, path string, value []byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		if value == nil {
			return tx.Bucket(bucketMeta).Delete(keySchemaVersion)
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, value)
	}))
	require.NoError(t, db.Close())
}

func TestOpenSchemaVersion(t *testing.T) {
	for _, c := range []struct {
		name  string
		value []byte
		want  error
	}{
		{"TooNew", []byte(strconv.Itoa(SchemaVersion + 1)), ErrSchemaTooNew},
		{"Missing", nil, ErrCorrupt},
		{"NotANumber", []byte("one"), ErrCorrupt},
		{"Zero", []byte("0"), ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, populated(t, 3))
			setMeta(t, path, c.value)
			err := openBad(t, path, c.want)
			t.Log(err)
		})
	}
}

// schemaV2 is a made-up next layout: version 2 adds a bucket and a label
// on every agent.
func schemaV2(migrate func(tx *bbolt.Tx) error) schema {
	sc := currentSchema()
	sc.version = SchemaVersion + 1
	sc.buckets = append(sc.buckets, []byte("extra"))
	sc.migrations = map[uint64]func(*bbolt.Tx) error{SchemaVersion: migrate}
	return sc
}

func TestOpenMigratesForward(t *testing.T) {
	path := writeFile(t, populated(t, 20))
	calls := 0
	sc := schemaV2(func(tx *bbolt.Tx) error {
		calls++
		b := tx.Bucket(bucketAgents)
		return b.ForEach(func(k, v []byte) error {
			var a registry.Agent
			if err := decodeAgent(string(k), v, &a); err != nil {
				return err
			}
			a.Labels["migrated"] = "v2"
			return putJSON(b, k, a)
		})
	})
	s, err := open(path, nil, sc)
	require.NoError(t, err)
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 20)
	for _, a := range list {
		assert.Equal(t, "v2", a.Labels["migrated"])
	}
	require.NoError(t, s.Close())
	assert.Equal(t, 1, calls)

	// Recorded: the migration does not run again, and a build that only
	// knows version 1 now refuses the file.
	s, err = open(path, nil, sc)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Equal(t, 1, calls)
	openBad(t, path, ErrSchemaTooNew)
}

func TestOpenFailedMigrationChangesNothing(t *testing.T) {
	path := writeFile(t, populated(t, 5))
	errMigrate := errors.New("migration failed")
	sc := schemaV2(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketAgents).Delete([]byte("agent-0000")); err != nil {
			return err
		}
		return errMigrate
	})
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = open(path, nil, sc)
	require.ErrorIs(t, err, errMigrate)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(before, after), "a failed migration must not change the file")

	// Still a version-1 store with every record.
	s, err := Open(path, nil)
	require.NoError(t, err)
	list, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	assert.Len(t, list, 5)
	require.NoError(t, s.Close())

	sc.migrations = nil
	_, err = open(path, nil, sc)
	require.ErrorContains(t, err, "no migration from schema version 1")
}

// fileWithEmptyBucket writes a store of n agents whose bucket is empty, as
// a file made before that bucket held anything (its nested buckets and
// counts included) has it, and returns its path.
func fileWithEmptyBucket(t *testing.T, n int, bucket []byte) string {
	t.Helper()
	path := writeFile(t, populated(t, n))
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucket); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucket)
		return err
	}))
	require.NoError(t, db.Close())
	return path
}

func TestOpenCreatesMissingBuckets(t *testing.T) {
	path := writeFile(t, populated(t, 2))
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket(bucketAudit) }))
	require.NoError(t, db.Close())

	s, err := Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		assert.NotNil(t, tx.Bucket(bucketAudit))
		return nil
	}))
	require.NoError(t, s.Close())
}

// TestOpenFileFromBeforeTheAuditLog opens a store written before the audit
// log existed — its audit bucket empty, without the nested entries bucket —
// and checks that it opens at the same schema version, keeps its records,
// and then keeps an audit log.
func TestOpenFileFromBeforeTheAuditLog(t *testing.T) {
	path := fileWithEmptyBucket(t, 3, bucketAudit) // as version 1 created it

	s, err := Open(path, nil)
	require.NoError(t, err)
	agents, err := s.ListAgents(t.Context())
	require.NoError(t, err)
	assert.Len(t, agents, 3)
	got, err := s.ListAudit(t.Context(), audit.Query{})
	require.NoError(t, err)
	assert.Empty(t, got, "an old file has an empty audit log")
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	e := audit.Entry{ID: audit.NewID(at), Time: at, Actor: "ci", Action: audit.ActionReload, Outcome: audit.OutcomeSuccess}
	require.NoError(t, s.AppendAudit(t.Context(), []audit.Entry{e}))
	require.NoError(t, s.Close())

	s, err = Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	got, err = s.ListAudit(t.Context(), audit.Query{})
	require.NoError(t, err)
	require.Len(t, got, 1, "the entry survives a reopen")
	assert.Equal(t, e.ID, got[0].ID)
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		assert.Equal(t, strconv.Itoa(SchemaVersion), string(tx.Bucket(bucketMeta).Get(keySchemaVersion)), "no new schema version")
		return nil
	}))
}
