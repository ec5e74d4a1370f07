package sealstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
	"github.com/agentmesh/agentmesh/store/sealstore"
)

func Example() {
	ctx := context.Background()
	key := make([]byte, sealstore.KeySize) // or sealstore.ParseKeyring(the key file)
	rand.Read(key)
	ring, err := sealstore.NewKeyring(key)
	if err != nil {
		panic(err)
	}
	inner := memstore.New()
	defer inner.Close()
	s := sealstore.Wrap(inner, ring, nil)

	err = s.UpdateAgent(ctx, "billing", func(*registry.Agent) (*registry.Agent, error) {
		return &registry.Agent{Name: "billing", Auth: &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"}}, nil
	})
	if err != nil {
		panic(err)
	}

	stored, _ := inner.GetAgent(ctx, "billing")
	fmt.Println(strings.HasPrefix(stored.Auth.Token, "sealed:v1:"+ring.KeyID()+":"))
	read, _ := s.GetAgent(ctx, "billing")
	fmt.Println(read.Auth.Token)
	// Output:
	// true
	// s3cret
}

// Rotation: a new key in front of the old one seals; the old one still
// opens until Rekey has sealed everything with the new one.
func ExampleRekey() {
	ctx := context.Background()
	oldKey, newKey := make([]byte, sealstore.KeySize), make([]byte, sealstore.KeySize)
	rand.Read(oldKey)
	rand.Read(newKey)
	inner := memstore.New()
	defer inner.Close()

	oldRing, _ := sealstore.NewKeyring(oldKey)
	_ = sealstore.Wrap(inner, oldRing, nil).UpdateAgent(ctx, "billing", func(*registry.Agent) (*registry.Agent, error) {
		return &registry.Agent{Name: "billing", Auth: &registry.Auth{Type: registry.AuthBearer, Token: "s3cret"}}, nil
	})

	both, _ := sealstore.NewKeyring(newKey, oldKey)
	res, err := sealstore.Rekey(ctx, inner, both)
	fmt.Println(res.Resealed, err)

	newRing, _ := sealstore.NewKeyring(newKey)
	a, err := sealstore.Wrap(inner, newRing, nil).GetAgent(ctx, "billing")
	fmt.Println(a.Auth.Token, err)
	_, err = sealstore.Wrap(inner, oldRing, nil).GetAgent(ctx, "billing")
	fmt.Println(errors.Is(err, sealstore.ErrUnknownKey))
	// Output:
	// 1 <nil>
	// s3cret <nil>
	// true
}
