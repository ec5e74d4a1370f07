// Package sealstore keeps agent credentials sealed at rest. [Wrap]
// decorates any [registry.Store] (store/boltstore, store/memstore,
// store/etcdstore, one of your own) so that the credential of every agent
// record (Auth.Token, which the mesh sends to the agent on delegation) is
// written AES-256-GCM-sealed and read back in clear: the registry, and
// everything above it, holds clear credentials in memory only, while the
// bbolt file, etcd and their backups hold sealed values.
//
// Keys live in a [Keyring]: the first key seals, every key opens, and a
// sealed value names the key that opens it by a key id (the first 4 bytes
// of the key's SHA-256), so a new key can be put in front and the records
// sealed with the old one still read. [Rekey] then seals every stored
// credential with the new key, and the old one can be dropped.
//
//	ring, err := sealstore.ParseKeyring(keyFile) // one base64 key a line
//	...
//	reg, err := registry.New(ctx, sealstore.Wrap(store, ring, nil), nil)
//
// # Sealed values
//
// A sealed credential is the text
//
//	sealed:v1:<key id>:<base64url(nonce | ciphertext)>
//
// with a random 96-bit nonce; the header and the agent's name are
// authenticated data, so a sealed value does not open in another agent's
// record. Only the token is sealed: the rest of the record (its endpoint,
// labels, the credential's type and header name) is stored as it is.
//
// # Records in clear
//
// A record written before a key was configured holds its credential in
// clear: it is read as it is, and sealed by its next write or by
// [Rekey]. Sealing does not scrub the old clear bytes from the backend:
// bbolt leaves them in free pages of the file until the pages are reused
// (copy the file with `bbolt compact` to drop them), and etcd keeps them
// in old revisions until it is compacted and defragmented.
//
// # Errors
//
// A sealed value whose key id is not in the ring fails the read with an
// error wrapping [ErrUnknownKey] that names the agent and the key id
// (never key material); one that does not open with its key, with
// [ErrCorrupt]. Over such a record GetAgent, ListAgents and UpdateAgent
// fail, so a registry over it does not load: add the key to the ring.
//
// # Concurrency
//
// A [Keyring] is immutable and safe for concurrent use; a wrapped store is
// safe for concurrent use when its inner store is.
package sealstore
