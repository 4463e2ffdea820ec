// Package pgtest gives each test its own PostgreSQL database, migrated and
// ready, on a real server: one server per test run, one fresh database per
// test, dropped when the test ends. Tests that use it can run in parallel and
// never see each other's rows.
//
// The server is, in order of preference:
//
//  1. TEST_DATABASE_URL, a postgres:// URL of a user that may create
//     databases (make test starts a throwaway server and sets it);
//  2. a postgres:18-alpine container started once per test process with
//     testcontainers-go, if a Docker engine answers;
//  3. none: the test fails and says how to get one. It never skips.
//
// The server must be PostgreSQL 13 or later (DROP DATABASE ... WITH (FORCE)).
//
// Each distinct list of migration sets is applied once per server to a
// template database; every test database is a copy of it (CREATE DATABASE ...
// TEMPLATE), about a tenth of a second instead of running goose per test. The
// template's name is a hash of the set names and of their migration files, so
// editing a migration builds a new template; templates left by older
// migrations stay on a long-lived server until someone drops them. A pg
// advisory lock guards the build, so parallel test processes (go test runs
// packages in parallel) build each template once.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/test/support/repo"
)

// EnvDatabaseURL names the variable holding the URL of the PostgreSQL server
// tests create their databases on.
const EnvDatabaseURL = "TEST_DATABASE_URL"

// ContainerImage is the image started when EnvDatabaseURL is unset and a
// Docker engine is available.
const ContainerImage = "postgres:18-alpine"

// setupTimeout bounds server start, template build and database creation.
const setupTimeout = 3 * time.Minute

// NewDSN creates a fresh database for this test, copied from a template on
// which the given migration sets have been applied in order, and returns its
// connection string. The database is dropped (WITH (FORCE), so connections
// left open do not block it) when the test and its subtests end.
//
// With no sets the database is empty.
func NewDSN(tb testing.TB, sets ...migrations.Set) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	admin := adminPool(tb)
	tpl, err := ensureTemplate(ctx, admin, sets)
	if err != nil {
		tb.Fatalf("pgtest: template for migration sets %s: %v", setNames(sets), err)
	}

	name := databaseName(tb.Name())
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{tpl}.Sanitize() + cloneStrategy
	if _, err := admin.Exec(ctx, create); err != nil {
		tb.Fatalf("pgtest: create database %s from %s: %v", name, tpl, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})

	dsn, err := withDatabase(serverURL, name)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// NewPool is NewDSN plus a pgx pool on that database, closed when the test
// ends (before the database is dropped).
func NewPool(tb testing.TB, sets ...migrations.Set) *pgxpool.Pool {
	tb.Helper()
	dsn := NewDSN(tb, sets...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		tb.Fatalf("pgtest: open pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		tb.Fatalf("pgtest: ping new database: %v", err)
	}
	return pool
}

// NewSession is NewPool with one connection: every statement runs on one
// session, so that a test can read what the session keeps (its prepared
// statements and their plans).
func NewSession(tb testing.TB, sets ...migrations.Set) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(NewDSN(tb, sets...))
	if err != nil {
		tb.Fatalf("pgtest: parse DSN: %v", err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("pgtest: open session: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// RowsRead returns how many rows of table the statements so far have read,
// by sequential scans and index fetches (pg_stat_user_tables). It flushes
// the session's counts first: a test compares two readings around a
// statement to see whether it found its rows by key.
func RowsRead(tb testing.TB, pool *pgxpool.Pool, table string) int64 {
	tb.Helper()
	ctx := context.Background()
	// A session's counts reach the view once it is idle.
	if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		tb.Fatalf("pgtest: flush statistics: %v", err)
	}
	var n int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
  FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&n); err != nil {
		tb.Fatalf("pgtest: rows read of %s: %v", table, err)
	}
	return n
}

// ServerURL returns the URL of the server the test databases live on,
// starting it first if needed. Tests rarely need it; it is for tests of
// database-level behaviour (creating roles, listing databases).
func ServerURL(tb testing.TB) string {
	tb.Helper()
	adminPool(tb)
	return serverURL
}

var (
	adminOnce sync.Once
	// serverURL and admin are set once by adminOnce and read-only afterwards.
	serverURL string
	admin     *pgxpool.Pool
	adminErr  error
	// cloneStrategy is " STRATEGY FILE_COPY" on PostgreSQL 15 and later:
	// for small templates it clones faster than 15's default, WAL_LOG.
	cloneStrategy string
)

// adminPool returns the pool on the server's maintenance database that
// creates and drops test databases, shared by all tests of the process. It is
// never closed: it lives as long as the test binary.
func adminPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	adminOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		serverURL, adminErr = server(ctx)
		if adminErr != nil {
			return
		}
		cfg, err := pgxpool.ParseConfig(serverURL)
		if err != nil {
			adminErr = fmt.Errorf("parse %s: %w", EnvDatabaseURL, err)
			return
		}
		cfg.MaxConns = 8
		admin, adminErr = pgxpool.NewWithConfig(ctx, cfg)
		var version int
		if adminErr == nil {
			adminErr = admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version)
		}
		if adminErr != nil {
			adminErr = fmt.Errorf("connect to %s: %w", envconfig.RedactDSN(serverURL), adminErr)
			return
		}
		if version >= 150000 {
			cloneStrategy = " STRATEGY FILE_COPY"
		}
	})
	if adminErr != nil {
		tb.Fatalf("pgtest: no PostgreSQL server: %v\n"+
			"\tRun the tests with `make test`, which starts a throwaway PostgreSQL and Kafka,\n"+
			"\tor point %s at a server whose user may CREATE DATABASE, e.g.\n"+
			"\t%s=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable go test ./...",
			adminErr, EnvDatabaseURL, EnvDatabaseURL)
	}
	return admin
}

// server returns the URL of the server to use: EnvDatabaseURL, else a
// container if Docker answers.
func server(ctx context.Context) (string, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u, nil
	}
	u, err := startContainer(ctx)
	if err != nil {
		return "", fmt.Errorf("%s is unset and no PostgreSQL container could be started: %w", EnvDatabaseURL, err)
	}
	return u, nil
}

var (
	templatesMu sync.Mutex
	// templates maps a template name to the mutex that serialises its build
	// within this process, and records which ones are known to be ready.
	templates = map[string]*templateState{}
)

type templateState struct {
	mu    sync.Mutex
	ready bool
}

// ensureTemplate returns the name of the template database for sets, building
// it if no process has yet.
func ensureTemplate(ctx context.Context, admin *pgxpool.Pool, sets []migrations.Set) (string, error) {
	name, err := templateName(sets)
	if err != nil {
		return "", err
	}

	templatesMu.Lock()
	st, ok := templates[name]
	if !ok {
		st = &templateState{}
		templates[name] = st
	}
	templatesMu.Unlock()

	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ready {
		return name, nil
	}
	if err := buildTemplate(ctx, admin, name, sets); err != nil {
		return "", err
	}
	st.ready = true
	return name, nil
}

// buildTemplate creates and migrates template database name unless another
// process already has. It holds a session advisory lock keyed by the name for
// the whole check-and-build, so concurrent test processes wait for the first.
// A template counts as built once it is marked IS_TEMPLATE, which is the last
// step; a half-built one left by a crashed process is dropped and rebuilt.
func buildTemplate(ctx context.Context, admin *pgxpool.Pool, name string, sets []migrations.Set) (err error) {
	conn, err := admin.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire admin connection: %w", err)
	}
	defer conn.Release()

	sum := sha256.Sum256([]byte("pgtest template " + name))
	key := int64(binary.BigEndian.Uint64(sum[:8])) //nolint:gosec // any 64 bits make a lock key; overflow is intended
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return fmt.Errorf("lock template build: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); uerr != nil {
			// The lock dies with the session: do not return it to the pool.
			_ = conn.Conn().Close(ctx)
			err = errors.Join(err, fmt.Errorf("unlock template build: %w", uerr))
		}
	}()

	var isTemplate bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&isTemplate)
	switch {
	case err == nil && isTemplate:
		return nil
	case err == nil: // left half-built by a crashed run
		if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop half-built template: %w", err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("look up template: %w", err)
	}

	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	if err := migrate(ctx, name, sets); err != nil {
		return err
	}
	// Refuse connections so CREATE DATABASE ... TEMPLATE never fails with
	// "source database is being accessed by other users".
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" WITH ALLOW_CONNECTIONS false IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("mark template: %w", err)
	}
	return nil
}

// migrate applies sets to database name through database/sql, which is what
// goose (behind migrations.Apply) works with.
func migrate(ctx context.Context, name string, sets []migrations.Set) error {
	dsn, err := withDatabase(serverURL, name)
	if err != nil {
		return err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("parse template dsn: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer func() { _ = db.Close() }()
	if err := migrations.Apply(ctx, db, sets...); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// templateName names the template after the migration sets and the contents
// of their files: "pgtpl_" and 24 hex digits of a SHA-256.
func templateName(sets []migrations.Set) (string, error) {
	dir, err := migrationsDir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, s := range sets {
		_, _ = fmt.Fprintf(h, "set %q table %q\n", s.Name, s.Table) // hash writes never fail
		files, err := filepath.Glob(filepath.Join(dir, s.Name, "*.sql"))
		if err != nil {
			return "", err
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f) //nolint:gosec // test helper reading the repo's own migrations
			if err != nil {
				return "", fmt.Errorf("hash migrations: %w", err)
			}
			_, _ = fmt.Fprintf(h, "file %q %d\n", filepath.Base(f), len(b))
			_, _ = h.Write(b)
		}
	}
	return "pgtpl_" + hex.EncodeToString(h.Sum(nil))[:24], nil
}

// migrationsDir is the repository's migrations folder. The migrations
// package embeds its files privately, so the hash reads the same files from
// the source tree.
func migrationsDir() (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	m := filepath.Join(root, "migrations")
	if _, err := os.Stat(m); err != nil {
		return "", fmt.Errorf("no migrations folder beside %s: %w", filepath.Join(root, "go.mod"), err)
	}
	return m, nil
}

// databaseName makes a unique, valid database name from a test name:
// "t_", up to 40 characters of the name, and a random suffix (63-byte limit).
func databaseName(testName string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 42 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails on supported platforms
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(rnd[:]))
	return b.String()
}

// withDatabase returns dsn pointing at database name instead.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse server url: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// key=value form: a later dbname overrides an earlier one.
	return dsn + " dbname=" + name, nil
}

func setNames(sets []migrations.Set) string {
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.Name
	}
	return "[" + strings.Join(names, ",") + "]"
}
