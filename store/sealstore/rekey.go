package sealstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/registry"
)

// RekeyResult counts the agent records [Rekey] went through.
type RekeyResult struct {
	// Resealed is how many credentials were sealed with the ring's first
	// key: Cleartext of them were stored in clear, the others under
	// another key of the ring.
	Resealed  int
	Cleartext int
	// Current is how many were already sealed with the first key.
	Current int
	// NoCredential is how many records hold no credential.
	NoCredential int
}

// errKeep ends an update without writing: the record is as it should be.
var errKeep = errors.New("sealstore: record kept")

// Rekey seals every agent credential stored in inner (the store itself,
// not a [Wrap] of it) with the first key of ring: credentials in clear
// and those sealed with another key of the ring are sealed anew, those
// already sealed with the first key are left as they are. Each record is
// rewritten with inner's UpdateAgent, so Rekey may run while other
// processes write the store (several replicas on etcd); those that read
// it must already hold the first key in their rings.
//
// A record that does not open (its key is not in ring) is left as it is,
// and its error is returned, joined with the others, once every other
// record is done; the result counts what was done.
func Rekey(ctx context.Context, inner registry.Store, ring *Keyring) (RekeyResult, error) {
	var res RekeyResult
	if ring.KeyID() == "" {
		return res, ErrNoKey
	}
	list, err := inner.ListAgents(ctx)
	if err != nil {
		return res, fmt.Errorf("sealstore: rekey: %w", err)
	}
	s := &Store{inner: inner, ring: ring} // for open and seal
	var errs []error
	for _, a := range list {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		name := a.Name
		var found found // of fn's last call: the one that counts
		err := inner.UpdateAgent(ctx, name, func(cur *registry.Agent) (*registry.Agent, error) {
			token := tokenOf(cur)
			id, _ := SealedKeyID(token)
			switch {
			case cur == nil:
				found = foundGone
				return nil, errKeep
			case token == "":
				found = foundNone
				return nil, errKeep
			case id == ring.KeyID():
				found = foundCurrent
				return nil, errKeep
			}
			found = foundSealed
			if !IsSealed(token) {
				found = foundClear
			}
			opened, _, err := s.open(name, *cur)
			if err != nil {
				return nil, err
			}
			return s.seal(name, &opened, stored{}) // stored{}: seal anew
		})
		switch {
		case err != nil && !errors.Is(err, errKeep):
			errs = append(errs, err)
		case found == foundNone:
			res.NoCredential++
		case found == foundCurrent:
			res.Current++
		case found == foundClear:
			res.Resealed++
			res.Cleartext++
		case found == foundSealed:
			res.Resealed++
		}
	}
	return res, errors.Join(errs...)
}

// found is what Rekey found in one record.
type found int

const (
	foundGone    found = iota // deleted meanwhile
	foundNone                 // no credential
	foundCurrent              // sealed with the first key
	foundClear                // in clear
	foundSealed               // sealed with another key
)

func tokenOf(a *registry.Agent) string {
	if a == nil || a.Auth == nil {
		return ""
	}
	return a.Auth.Token
}
