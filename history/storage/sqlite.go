package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Defaults of the SQLite handles.
const (
	DefaultSQLiteReadConns = 4
	DefaultBusyTimeout     = 10 * time.Second
)

// FileSpec describes one SQLite file of the data directory and how its
// connections are set up. Each store keeps its own file, so that no store's
// writer waits for another's (SQLite has one write lock per file).
type FileSpec struct {
	// Name is the file's name in the data directory.
	Name string
	// Synchronous is the file's synchronous pragma: FULL (a commit is on
	// disk when it returns) or NORMAL (a commit may be lost in a power cut,
	// for what can be derived again).
	Synchronous string
	// ForeignKeys turns foreign key enforcement on.
	ForeignKeys bool
	// WriteCacheKiB and ReadCacheKiB size the page caches of the writer and
	// of each reader (0: SQLite's default).
	WriteCacheKiB, ReadCacheKiB int
	// ReadConns is the number of read-only connections
	// (DefaultSQLiteReadConns when 0); -1 serves reads on the writer.
	ReadConns int
}

// File is one open SQLite file: a writer connection (its transactions
// begin IMMEDIATE) and a pool of read-only connections that read from
// their own WAL snapshots, so reads never wait for the writer.
type File struct {
	Path  string
	Write *sql.DB
	Read  *sql.DB
}

// SQLiteOptions tune OpenSQLite.
type SQLiteOptions struct {
	// BusyTimeout is how long a connection waits for a lock another one
	// holds, such as a second process's (DefaultBusyTimeout when 0).
	BusyTimeout time.Duration
}

// SQLite is the data directory's set of SQLite files, each opened once
// per process and shared by whatever uses it.
type SQLite struct {
	dir  string
	busy time.Duration

	mu     sync.Mutex
	files  map[string]*File
	closed bool
}

// OpenSQLite returns the set of files in dir. It opens nothing yet and
// creates nothing: File opens (and creates) a file the first time it is
// asked for.
func OpenSQLite(dir string, opts SQLiteOptions) (*SQLite, error) {
	if strings.ContainsAny(dir, "?#") {
		return nil, fmt.Errorf("data directory %q: the path must not contain ? or #", dir)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	return &SQLite{dir: dir, busy: opts.BusyTimeout, files: make(map[string]*File)}, nil
}

// Dialect is DialectSQLite.
func (s *SQLite) Dialect() Dialect { return DialectSQLite }

// Dir is the data directory.
func (s *SQLite) Dir() string { return s.dir }

// File returns the open file of spec, opening it (and creating the data
// directory and the file) the first time.
func (s *SQLite) File(ctx context.Context, spec FileSpec) (*File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if f, ok := s.files[spec.Name]; ok {
		return f, nil
	}
	f, err := s.open(ctx, spec)
	if err != nil {
		return nil, err
	}
	s.files[spec.Name] = f
	return f, nil
}

func (s *SQLite) open(ctx context.Context, spec FileSpec) (*File, error) {
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(s.dir, spec.Name)
	common := "_pragma=busy_timeout(" + strconv.FormatInt(s.busy.Milliseconds(), 10) + ")"
	if spec.ForeignKeys {
		common += "&_pragma=foreign_keys(1)"
	}
	sync := spec.Synchronous
	if sync == "" {
		sync = "FULL"
	}
	wq := "?_txlock=immediate&" + common + "&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")"
	if spec.WriteCacheKiB > 0 {
		wq += "&_pragma=cache_size(-" + strconv.Itoa(spec.WriteCacheKiB) + ")"
	}
	write, err := sql.Open("sqlite", path+wq)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	oneConn(write, 1)
	// The writer connects first: it turns WAL on before any reader opens.
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f := &File{Path: path, Write: write, Read: write}
	if spec.ReadConns < 0 {
		return f, nil
	}
	n := spec.ReadConns
	if n == 0 {
		n = DefaultSQLiteReadConns
	}
	rq := "?" + common + "&_pragma=query_only(1)"
	if spec.ReadCacheKiB > 0 {
		rq += "&_pragma=cache_size(-" + strconv.Itoa(spec.ReadCacheKiB) + ")"
	}
	read, err := sql.Open("sqlite", path+rq)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	oneConn(read, n)
	if err := read.PingContext(ctx); err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f.Read = read
	return f, nil
}

// oneConn keeps n connections open for the life of the handle.
func oneConn(db *sql.DB, n int) {
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// Close closes every file opened.
func (s *SQLite) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.close())
	}
	s.files = nil
	return errors.Join(errs...)
}

func (f *File) close() error {
	if f.Read != f.Write {
		return errors.Join(f.Read.Close(), f.Write.Close())
	}
	return f.Write.Close()
}

// Migrate applies the pending migrations of each line, in order, each in
// its line's file (opened, and created, when needed).
func (s *SQLite) Migrate(ctx context.Context, lines ...Line) ([]Result, error) {
	out := make([]Result, 0, len(lines))
	for _, l := range lines {
		f, err := s.File(ctx, l.File)
		if err != nil {
			return out, fmt.Errorf("%s: %w", l.Name, err)
		}
		res, err := Apply(ctx, DialectSQLite, f.Write, "", l)
		if err != nil {
			return out, fmt.Errorf("%s: %w", f.Path, err)
		}
		out = append(out, res...)
	}
	return out, nil
}

// Check reports where each line's file stands, creating nothing: a file
// that does not exist stands at 0, and one that does is read through a
// read-only connection of its own.
func (s *SQLite) Check(ctx context.Context, lines ...Line) ([]Status, error) {
	out := make([]Status, 0, len(lines))
	for i := range lines {
		l := &lines[i]
		path := filepath.Join(s.dir, l.File.Name)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			out = append(out, NewStatus(l, 0))
			continue
		} else if err != nil {
			return out, fmt.Errorf("%s: %w", l.Name, err)
		}
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout("+strconv.FormatInt(s.busy.Milliseconds(), 10)+
			")&_pragma=query_only(1)")
		if err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		st, err := Versions(ctx, DialectSQLite, db, *l)
		db.Close()
		if err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, st...)
	}
	return out, nil
}
