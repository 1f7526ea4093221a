package sqlcontracts_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/contractstoretest"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

func TestConformancePostgres(t *testing.T) {
	url := storagetest.PostgresURL(t)
	contractstoretest.Run(t, func(t *testing.T) contractstore.Backend {
		return contractstoretest.OpenPostgres(t, url, storagetest.NewSchema(t, url, "cvtest"))
	})
}

func TestSchemaVersionAndConcurrentInit(t *testing.T) {
	url := storagetest.PostgresURL(t)
	schema := storagetest.NewSchema(t, url, "cvtest")
	ctx := context.Background()
	db, err := storage.OpenPostgres(ctx, url, storage.PostgresOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	s := openAndInit(t, db, 3)
	defer s.Close()
}

// BenchmarkLists: pages of each contract filter over 20,000 contracts.
//
//	go test -run '^$' -bench BenchmarkLists ./contracts/contractstore/sqlcontracts/
func BenchmarkListsPostgres(b *testing.B) {
	url := storagetest.PostgresURL(b)
	schema := storagetest.NewSchema(b, url, "cvtest")
	store := contractstoretest.OpenPostgres(b, url, schema)
	defer store.Close()
	contractstoretest.BenchmarkLists(b, store, 20000, func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "ANALYZE "+pgx.Identifier{schema, "cv_contracts"}.Sanitize()+", "+
			pgx.Identifier{schema, "cv_contract_tags"}.Sanitize()+", "+pgx.Identifier{schema, "cv_contract_parties"}.Sanitize()); err != nil {
			b.Fatal(err)
		}
	}, store.(*sqlcontracts.Store).Counts.Forget)
}
