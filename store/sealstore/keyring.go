package sealstore

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the size of a key of a [Keyring]: AES-256.
const KeySize = 32

// Prefix starts every sealed value: "sealed:v1:<key id>:<payload>".
const Prefix = "sealed:"

// version is the only format of sealed values this build writes and reads.
const version = "v1"

// Sentinel errors. Match them with [errors.Is]; the errors returned wrap
// them with the agent and the key id involved, never key material.
var (
	// ErrUnknownKey: a sealed value names a key id that is not in the
	// key ring (or no key ring is configured). The key that sealed it must
	// be added to the ring to read the record.
	ErrUnknownKey = errors.New("sealstore: sealed with a key that is not in the key ring")

	// ErrCorrupt: a sealed value does not open with the key its id names:
	// it was changed, moved to another agent's record, or is not a value
	// this build writes.
	ErrCorrupt = errors.New("sealstore: sealed value does not open")

	// ErrNoKey: sealing was asked of an empty key ring.
	ErrNoKey = errors.New("sealstore: no key in the key ring")
)

// Keyring is an ordered set of AES-256 keys: the first seals, every key
// opens. A key is known by its id, the first 4 bytes of its SHA-256 in
// hex (8 characters), so keys need no names and a sealed value says which
// key opens it without saying anything about the key:
//
//	base64 -d <<<"$KEY" | sha256sum | cut -c1-8
//
// A nil or zero Keyring has no key: [Keyring.Seal] fails with [ErrNoKey]
// and [Keyring.Open] opens only values in clear. A Keyring is immutable
// and safe for concurrent use.
type Keyring struct {
	keys []ringKey
}

type ringKey struct {
	id   string
	aead cipher.AEAD
}

// NewKeyring returns the key ring of keys, each [KeySize] bytes; keys[0]
// seals. At least one key is required, and no key may appear twice.
// NewKeyring keeps no reference to the slices.
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	return newKeyring(keys, func(i int) string { return fmt.Sprintf("key %d", i+1) })
}

// newKeyring is NewKeyring with where(i) naming keys[i] in errors.
func newKeyring(keys [][]byte, where func(i int) string) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, ErrNoKey
	}
	r := &Keyring{keys: make([]ringKey, 0, len(keys))}
	seen := make(map[string]int, len(keys)) // key id → index
	for i, k := range keys {
		rk, err := newRingKey(k)
		if err != nil {
			return nil, fmt.Errorf("sealstore: %s: %w", where(i), err)
		}
		if j, dup := seen[rk.id]; dup {
			return nil, fmt.Errorf("sealstore: %s: same key as %s (id %s)", where(i), where(j), rk.id)
		}
		seen[rk.id] = i
		r.keys = append(r.keys, rk)
	}
	return r, nil
}

func newRingKey(k []byte) (ringKey, error) {
	if len(k) != KeySize {
		return ringKey{}, fmt.Errorf("the key is %d bytes, want %d", len(k), KeySize)
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return ringKey{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return ringKey{}, err
	}
	return ringKey{id: KeyID(k), aead: aead}, nil
}

// KeyID returns the id of key: the first 4 bytes of its SHA-256, in hex.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// ParseKeyring parses a key file: one key a line, in standard base64
// (padded, as `openssl rand -base64 32` prints it); blank lines and
// everything from a "#" on are ignored, and so are spaces around a key
// and a final "\r". The first key seals. Errors name the line, never its
// content.
func ParseKeyring(data []byte) (*Keyring, error) {
	var keys [][]byte
	var lines []int // of keys[i]
	for n, line := range bytes.Split(data, []byte("\n")) {
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		k := make([]byte, base64.StdEncoding.DecodedLen(len(line)))
		m, err := base64.StdEncoding.Strict().Decode(k, line)
		if err != nil {
			return nil, fmt.Errorf("sealstore: line %d: not a standard base64 key (make one with: openssl rand -base64 32)", n+1)
		}
		keys, lines = append(keys, k[:m]), append(lines, n+1)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: the key file holds no key", ErrNoKey)
	}
	return newKeyring(keys, func(i int) string { return fmt.Sprintf("line %d", lines[i]) })
}

// KeyID returns the id of the key that seals, "" for a ring without keys.
func (r *Keyring) KeyID() string {
	if r == nil || len(r.keys) == 0 {
		return ""
	}
	return r.keys[0].id
}

// KeyIDs returns the ids of every key, the sealing key first.
func (r *Keyring) KeyIDs() []string {
	if r == nil {
		return nil
	}
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.id
	}
	return ids
}

func (r *Keyring) key(id string) (ringKey, bool) {
	if r != nil {
		for _, k := range r.keys {
			if k.id == id {
				return k, true
			}
		}
	}
	return ringKey{}, false
}

// Seal returns token sealed with the ring's first key for the agent
// name: "sealed:v1:<key id>:<base64url(nonce | AES-256-GCM ciphertext)>",
// with a random nonce. The header and the name are authenticated, so
// the value opens only in the record of that agent. It fails with
// [ErrNoKey] on a ring without keys.
func (r *Keyring) Seal(name, token string) (string, error) {
	if r == nil || len(r.keys) == 0 {
		return "", ErrNoKey
	}
	k := r.keys[0]
	head := header(k.id)
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(token)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("sealstore: nonce: %w", err)
	}
	out := k.aead.Seal(nonce, nonce, []byte(token), additional(head, name))
	return head + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open returns the token that value holds for the agent name: value
// itself when it is not sealed (it does not start with [Prefix]), else
// the token [Keyring.Seal] sealed. A key id not in the ring is an error
// wrapping [ErrUnknownKey]; a value that does not open, one wrapping
// [ErrCorrupt].
func (r *Keyring) Open(name, value string) (string, error) {
	if !IsSealed(value) {
		return value, nil
	}
	id, payload, err := parseSealed(value)
	if err != nil {
		return "", fmt.Errorf("%w: agent %q: %w", ErrCorrupt, name, err)
	}
	k, ok := r.key(id)
	if !ok {
		ids := "none configured"
		if r != nil && len(r.keys) > 0 {
			ids = "the ring holds " + strings.Join(r.KeyIDs(), ", ")
		}
		return "", fmt.Errorf("%w: agent %q: its credential is sealed with key %s (%s)", ErrUnknownKey, name, id, ids)
	}
	ns := k.aead.NonceSize()
	if len(payload) < ns+k.aead.Overhead() {
		return "", fmt.Errorf("%w: agent %q: key %s: payload too short", ErrCorrupt, name, id)
	}
	plain, err := k.aead.Open(nil, payload[:ns], payload[ns:], additional(header(id), name))
	if err != nil {
		return "", fmt.Errorf("%w: agent %q: key %s: the value was changed or belongs to another agent", ErrCorrupt, name, id)
	}
	return string(plain), nil
}

// IsSealed reports whether value is a sealed value (starts with [Prefix]).
func IsSealed(value string) bool { return strings.HasPrefix(value, Prefix) }

// SealedKeyID returns the key id of a sealed value; ok is false for a
// value that is not sealed or whose header is malformed.
func SealedKeyID(value string) (id string, ok bool) {
	if !IsSealed(value) {
		return "", false
	}
	id, _, err := parseSealed(value)
	return id, err == nil
}

func header(id string) string { return Prefix + version + ":" + id + ":" }

// additional is the authenticated data of a sealed value: its header and
// the agent's name.
func additional(head, name string) []byte { return []byte(head + name) }

// parseSealed splits a sealed value into its key id and payload.
func parseSealed(value string) (id string, payload []byte, err error) {
	rest := strings.TrimPrefix(value, Prefix)
	v, rest, ok := strings.Cut(rest, ":")
	if !ok || v != version {
		return "", nil, errors.New("not a v1 sealed value")
	}
	id, enc, ok := strings.Cut(rest, ":")
	if !ok || len(id) != 8 || !isHex(id) {
		return "", nil, errors.New("malformed key id")
	}
	payload, err = base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", nil, errors.New("malformed payload")
	}
	return id, payload, nil
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
