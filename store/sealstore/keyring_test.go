package sealstore

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

func b64(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

func TestParseKeyring(t *testing.T) {
	a, b := newKey(t), newKey(t)
	ring, err := ParseKeyring([]byte("# agentmesh keys\n\n  " + b64(b) + "  # new, seals\r\n" + b64(a) + "\n# old\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{KeyID(b), KeyID(a)}, ring.KeyIDs())
	assert.Equal(t, KeyID(b), ring.KeyID())

	short := base64.StdEncoding.EncodeToString(a[:24])
	cases := []struct {
		name, file, want string
	}{
		{"empty", "", "holds no key"},
		{"only comments", "# nothing\n\n   # here\n", "holds no key"},
		{"not base64", b64(a) + "\n" + "not-base64!\n", "line 2: not a standard base64 key"},
		{"unpadded", strings.TrimRight(b64(a), "="), "line 1: not a standard base64 key"},
		{"wrong size", "\n\n" + short, "line 3: the key is 24 bytes, want 32"},
		{"duplicate", b64(a) + "\n" + b64(b) + "\n" + b64(a), "line 3: same key as line 1 (id " + KeyID(a) + ")"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseKeyring([]byte(c.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			// An error never shows what the line held.
			for _, line := range strings.Split(c.file, "\n") {
				if line = strings.TrimSpace(line); len(line) > 8 && !strings.HasPrefix(line, "#") {
					assert.NotContains(t, err.Error(), line)
				}
			}
		})
	}
}

func TestNewKeyring(t *testing.T) {
	a := newKey(t)
	_, err := NewKeyring()
	assert.ErrorIs(t, err, ErrNoKey)
	_, err = NewKeyring(a[:16])
	assert.ErrorContains(t, err, "key 1: the key is 16 bytes, want 32")
	_, err = NewKeyring(a, bytes.Clone(a))
	assert.ErrorContains(t, err, "key 2: same key as key 1")
}

func TestKeyIDIsSHA256Prefix(t *testing.T) {
	// The id an operator computes with: base64 -d | sha256sum | cut -c1-8
	k := bytes.Repeat([]byte{0}, KeySize)
	assert.Equal(t, "66687aad", KeyID(k))
}

func TestSealOpen(t *testing.T) {
	a, b := newKey(t), newKey(t)
	ring, err := NewKeyring(a, b)
	require.NoError(t, err)

	v1, err := ring.Seal("billing", "s3cret")
	require.NoError(t, err)
	v2, err := ring.Seal("billing", "s3cret")
	require.NoError(t, err)
	assert.NotEqual(t, v1, v2, "every seal has a nonce of its own")
	assert.True(t, strings.HasPrefix(v1, "sealed:v1:"+KeyID(a)+":"), v1)
	assert.NotContains(t, v1, "s3cret")
	id, ok := SealedKeyID(v1)
	assert.True(t, ok)
	assert.Equal(t, KeyID(a), id)

	got, err := ring.Open("billing", v1)
	require.NoError(t, err)
	assert.Equal(t, "s3cret", got)

	// The second key opens what it sealed.
	old, err := NewKeyring(b)
	require.NoError(t, err)
	vb, err := old.Seal("billing", "older")
	require.NoError(t, err)
	got, err = ring.Open("billing", vb)
	require.NoError(t, err)
	assert.Equal(t, "older", got)

	// Clear values pass through.
	got, err = ring.Open("billing", "plain-token")
	require.NoError(t, err)
	assert.Equal(t, "plain-token", got)

	// Moved to another agent's record, it does not open.
	_, err = ring.Open("payroll", v1)
	assert.ErrorIs(t, err, ErrCorrupt)

	// Changed, it does not open.
	tampered := []byte(v1)
	tampered[len(tampered)-3] ^= 1
	if tampered[len(tampered)-3] == '-' || tampered[len(tampered)-3] == '_' {
		tampered[len(tampered)-3] = 'A'
	}
	_, err = ring.Open("billing", string(tampered))
	assert.ErrorIs(t, err, ErrCorrupt)
	// A changed header names another key: the id no longer matches.
	_, err = ring.Open("billing", strings.Replace(v1, KeyID(a), KeyID(b), 1))
	assert.ErrorIs(t, err, ErrCorrupt)

	for _, bad := range []string{"sealed:", "sealed:v2:" + KeyID(a) + ":AAAA", "sealed:v1:XYZ:AAAA", "sealed:v1:" + KeyID(a) + ":***", "sealed:v1:" + KeyID(a) + ":AAAA"} {
		_, err = ring.Open("billing", bad)
		assert.ErrorIs(t, err, ErrCorrupt, bad)
	}
}

func TestOpenUnknownKey(t *testing.T) {
	a, b := newKey(t), newKey(t)
	ringA, _ := NewKeyring(a)
	ringB, _ := NewKeyring(b)
	v, err := ringA.Seal("billing", "s3cret")
	require.NoError(t, err)

	_, err = ringB.Open("billing", v)
	require.ErrorIs(t, err, ErrUnknownKey)
	assert.Contains(t, err.Error(), `agent "billing"`)
	assert.Contains(t, err.Error(), "sealed with key "+KeyID(a))
	assert.Contains(t, err.Error(), "the ring holds "+KeyID(b))
	assert.NotContains(t, err.Error(), b64(a))
	assert.NotContains(t, err.Error(), b64(b))

	var none *Keyring
	_, err = none.Open("billing", v)
	require.ErrorIs(t, err, ErrUnknownKey)
	assert.Contains(t, err.Error(), "none configured")
	_, err = none.Seal("billing", "x")
	assert.ErrorIs(t, err, ErrNoKey)
	assert.Empty(t, none.KeyID())
}

// FuzzParseKeyring: any key file parses to a ring of distinct 32-byte
// keys or fails with an error that shows none of the file's content.
func FuzzParseKeyring(f *testing.F) {
	k := bytes.Repeat([]byte{7}, KeySize)
	f.Add([]byte(b64(k) + "\n"))
	f.Add([]byte("# c\n\n " + b64(k) + " # x\r\n" + b64(bytes.Repeat([]byte{8}, KeySize))))
	f.Add([]byte(b64(k) + "\n" + b64(k)))
	f.Add([]byte("====\n"))
	f.Add([]byte(b64(k[:31])))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ring, err := ParseKeyring(data)
		if err != nil {
			if ring != nil {
				t.Fatal("a ring with an error")
			}
			for _, line := range bytes.Split(data, []byte("\n")) {
				line = bytes.TrimSpace(line)
				if len(line) >= 16 && bytes.Contains([]byte(err.Error()), line) {
					t.Fatalf("the error %q shows the file's line %q", err, line)
				}
			}
			return
		}
		ids := ring.KeyIDs()
		if len(ids) == 0 {
			t.Fatal("a ring without keys")
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] || len(id) != 8 {
				t.Fatalf("key ids %v", ids)
			}
			seen[id] = true
		}
		v, err := ring.Seal("a", "tok")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ring.Open("a", v); err != nil || got != "tok" {
			t.Fatalf("Open(Seal) = %q, %v", got, err)
		}
	})
}

// FuzzOpen: a stored value, whatever it holds, opens to itself (clear),
// opens to what was sealed, or fails with ErrUnknownKey or ErrCorrupt.
func FuzzOpen(f *testing.F) {
	ring, err := NewKeyring(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		f.Fatal(err)
	}
	v, _ := ring.Seal("billing", "s3cret")
	f.Add("billing", v)
	f.Add("billing", "plain")
	f.Add("x", "sealed:v1:00000000:AAAA")
	f.Add("x", "sealed:v1:"+ring.KeyID()+":")
	f.Fuzz(func(t *testing.T, name, value string) {
		got, err := ring.Open(name, value)
		switch {
		case err == nil && !IsSealed(value) && got != value:
			t.Fatalf("a clear value changed: %q → %q", value, got)
		case err != nil && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrCorrupt):
			t.Fatalf("unexpected error %v", err)
		case err != nil && !IsSealed(value):
			t.Fatalf("a clear value failed: %v", err)
		}
	})
}
