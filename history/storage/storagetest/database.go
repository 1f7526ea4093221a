package storagetest

import (
	"net/url"
	"os"
	"testing"
)

// DatabaseURL returns the PostgreSQL database the tests may use,
// MARLOWE_TEST_DATABASE_URL. Without it the test is skipped, except under
// CI (CI=true), where PostgreSQL tests must run: there it fails.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("MARLOWE_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MARLOWE_TEST_DATABASE_URL is not set under CI")
		}
		t.Skip("MARLOWE_TEST_DATABASE_URL is not set")
	}
	return base
}

// SchemaURL returns the database URL base with its search_path set to
// schema: the URL of a store whose tables live in that schema.
func SchemaURL(t testing.TB, base, schema string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
