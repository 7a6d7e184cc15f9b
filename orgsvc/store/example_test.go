package store_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/orgedge/edge/orgsvc/store"
)

func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "orgsvc")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// "postgres://user@host/db" would open PostgreSQL instead.
	s, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "orgsvc.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := time.Now()
	org, err := s.CreateOrganization(ctx, store.Organization{Name: "acme", CreatedAt: now},
		&store.Member{UserID: "alice", Email: "alice@example.com", JoinedAt: now})
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.CreateOrganization(ctx, store.Organization{Name: "acme", CreatedAt: now}, nil)
	fmt.Println(org.MemberCount, err)
	// Output: 1 organization name already taken
}
