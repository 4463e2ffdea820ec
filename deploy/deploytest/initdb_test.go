package deploytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/repo"
)

// initScript is what the compose init script creates.
type initScript struct {
	sql       string
	roles     map[string]string // role -> password
	databases map[string]string // database -> owner
}

var (
	createRole     = regexp.MustCompile(`(?i)CREATE\s+ROLE\s+(\w+)\s+LOGIN\s+PASSWORD\s+'([^']*)'`)
	createDatabase = regexp.MustCompile(`(?i)CREATE\s+DATABASE\s+(\w+)\s+OWNER\s+(\w+)`)
	serviceName    = regexp.MustCompile(`\b(transfers|ledger|antifraud|notifications)\b`)
)

func readInitScript(tb testing.TB) initScript {
	tb.Helper()
	path := filepath.Join(repo.Path(tb), "deploy", "compose", "initdb", "01-databases.sql")
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	s := initScript{sql: string(b), roles: map[string]string{}, databases: map[string]string{}}
	for _, m := range createRole.FindAllStringSubmatch(s.sql, -1) {
		s.roles[m[1]] = m[2]
	}
	for _, m := range createDatabase.FindAllStringSubmatch(s.sql, -1) {
		s.databases[m[1]] = m[2]
	}
	return s
}

// TestInitScriptOnPostgres runs the compose init script on a real server,
// with every service name suffixed so that it cannot clash with anything
// else on a shared server, and checks what the compose stack relies on: each
// service's role can connect to its own database and apply the service's
// migrations there without superuser rights, and cannot connect to another
// service's database.
func TestInitScriptOnPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	server := pgtest.ServerURL(t)

	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	suffix := "_dt" + hex.EncodeToString(rnd[:])
	rename := func(s string) string { return serviceName.ReplaceAllString(s, "${1}"+suffix) }

	script := readInitScript(t)
	if len(script.databases) != len(services) {
		t.Fatalf("init script creates databases %v, want one per service", sortedKeys(script.databases))
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("connect to %s: %v", pgtest.EnvDatabaseURL, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		defer admin.Close(ctx)
		for db, owner := range script.databases {
			if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+rename(db)+" WITH (FORCE)"); err != nil {
				t.Errorf("drop database: %v", err)
			}
			if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+rename(owner)); err != nil {
				t.Errorf("drop role: %v", err)
			}
		}
	})
	// Simple protocol: the script is several statements, and CREATE
	// DATABASE cannot run inside the implicit transaction of a batch.
	for _, stmt := range statements(rename(script.sql)) {
		if _, err := admin.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("init script statement %q: %v", stmt, err)
		}
	}

	connect := func(role, db string) (*pgx.Conn, error) {
		u, err := url.Parse(server)
		if err != nil {
			return nil, err
		}
		u.User = url.UserPassword(rename(role), rename(script.roles[role]))
		u.Path = "/" + rename(db)
		return pgx.Connect(ctx, u.String())
	}
	for db, owner := range script.databases {
		t.Run(db, func(t *testing.T) {
			conn, err := connect(owner, db)
			if err != nil {
				t.Fatalf("role %s cannot connect to its database: %v", owner, err)
			}
			defer conn.Close(context.Background())
			var super bool
			if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
				t.Fatal(err)
			}
			if super {
				t.Fatalf("role %s is a superuser", owner)
			}
			cfg := conn.Config().Copy()
			sqlDB := stdlib.OpenDB(*cfg)
			defer sqlDB.Close()
			if err := migrations.Apply(ctx, sqlDB, migrations.ForService(db)...); err != nil {
				t.Fatalf("migrations of %s as its own role: %v", db, err)
			}

			for other := range script.databases {
				if other == db {
					continue
				}
				c, err := connect(owner, other)
				if err == nil {
					c.Close(context.Background())
					t.Errorf("role %s connected to %s's database", owner, other)
					continue
				}
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
					t.Errorf("role %s connecting to %s: %v, want insufficient_privilege (42501)", owner, other, err)
				}
			}
		})
	}
}

// statements splits a plain SQL script (no functions, no quoted semicolons)
// into statements, dropping comments.
func statements(script string) []string {
	var b strings.Builder
	for _, line := range strings.Split(script, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	var out []string
	for _, s := range strings.Split(b.String(), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
