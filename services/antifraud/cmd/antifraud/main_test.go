package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/test/pgtest"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t) // an empty database
	env := map[string]string{"DATABASE_URL": dsn, "LOG_FORMAT": "text"}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 { // applying twice changes nothing
		if err := run(ctx, []string{"antifraud", "migrate"}, withAuth(env), &out); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	if !strings.Contains(out.String(), "migrations applied") {
		t.Errorf("log %q does not say the migrations were applied", out.String())
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var tables []string
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'
		AND tablename IN ('decision', 'outbox_event', 'inbox_event') ORDER BY tablename`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(tables, ","), "decision,inbox_event,outbox_event"; got != want {
		t.Errorf("tables %s, want %s", got, want)
	}
}

func TestRunRejectsBadInvocations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"unknown subcommand", []string{"antifraud", "serve"}, nil, "usage"},
		{"extra argument", []string{"antifraud", "migrate", "now"}, nil, "usage"},
		{"no database", []string{"antifraud"}, nil, "DATABASE_URL is required"},
		{"bad threshold", []string{"antifraud"}, map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/a",
			"ANTIFRAUD_BLOCK_THRESHOLD": "eighty"}, "ANTIFRAUD_BLOCK_THRESHOLD"},
		{"bad log level", []string{"antifraud"}, map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/a",
			"LOG_LEVEL": "loud"}, "LOG_LEVEL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, withAuth(tt.env), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run() error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// withAuth is env plus the authentication configuration every service
// requires (the JWKS file is only read when the service runs).
func withAuth(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return map[string]string{"AUTH_JWKS_FILE": "/etc/paysuite/jwks.json", "AUTH_ISSUER": "https://issuer.example"}[k]
	}
}
