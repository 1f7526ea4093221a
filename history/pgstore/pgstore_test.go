package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/pgstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	historytest.Run(t, openTest)
}

func TestOpenUnreachable(t *testing.T) {
	_, err := pgstore.Open(context.Background(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", pgstore.Options{})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("open of a closed port: %v", err)
	}
	if _, err := pgstore.Open(context.Background(), "postgres://%zz", pgstore.Options{}); err == nil {
		t.Fatal("open of a malformed URL succeeded")
	}
}
