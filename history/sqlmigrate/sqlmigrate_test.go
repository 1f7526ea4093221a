package sqlmigrate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/marlowe-follower/follower/history/sqlmigrate"
)

var errTooNew = errors.New("schema too new")

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_second.sql": {Data: []byte("two")},
		"m/0001_first.sql":  {Data: []byte("one")},
		"m/README.md":       {Data: []byte("not a migration")},
	}
	ms, err := sqlmigrate.Load(fsys, "m")
	if err != nil || len(ms) != 2 || ms[0].Version != 1 || ms[1].SQL != "two" || ms[1].Name != "0002_second.sql" {
		t.Fatalf("%+v %v", ms, err)
	}
	for name, bad := range map[string]fstest.MapFS{
		"gap":       {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"no number": {"m/first.sql": {}},
		"zero":      {"m/0000_a.sql": {}},
		"none":      {"m/README.md": {}},
		"no dir":    {},
	} {
		if _, err := sqlmigrate.Load(bad, "m"); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// fakeTx records what Apply runs.
type fakeTx struct {
	version int
	ran     []string
	failOn  string
}

func (f *fakeTx) Exec(_ context.Context, q string) error {
	if f.failOn != "" && q == f.failOn {
		return errors.New("boom")
	}
	f.ran = append(f.ran, q)
	return nil
}
func (f *fakeTx) Version(context.Context) (int, error) { return f.version, nil }
func (f *fakeTx) Record(_ context.Context, m sqlmigrate.Migration) error {
	f.version = m.Version
	return nil
}

func TestApply(t *testing.T) {
	ms := []sqlmigrate.Migration{{Version: 1, Name: "0001_a.sql", SQL: "a"}, {Version: 2, Name: "0002_b.sql", SQL: "b"}}
	ctx := context.Background()

	tx := &fakeTx{version: 1}
	from, to, err := sqlmigrate.Apply(ctx, tx, ms, "create", errTooNew)
	if err != nil || from != 1 || to != 2 || strings.Join(tx.ran, ",") != "create,b" {
		t.Fatalf("from %d to %d ran %v: %v", from, to, tx.ran, err)
	}

	tx = &fakeTx{version: 3}
	if _, _, err := sqlmigrate.Apply(ctx, tx, ms, "create", errTooNew); !errors.Is(err, errTooNew) {
		t.Fatalf("newer schema: %v", err)
	}

	tx = &fakeTx{failOn: "b"}
	if _, _, err := sqlmigrate.Apply(ctx, tx, ms, "create", errTooNew); err == nil || !strings.Contains(err.Error(), "0002_b.sql") {
		t.Fatalf("failing migration: %v", err)
	}
}
