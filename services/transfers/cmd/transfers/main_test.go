package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/test/pgtest"
)

func TestMigrateSubcommand(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t) // an empty database
	env := map[string]string{"DATABASE_URL": dsn, "LOG_FORMAT": "json"}
	var out bytes.Buffer
	for range 2 { // twice: applying migrations again changes nothing
		if err := run(context.Background(), []string{"transfers", "migrate"}, withAuth(env), &out); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT tablename FROM pg_tables WHERE tablename IN ('transferencia', 'outbox_event', 'inbox_event') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(tables, ",") != "inbox_event,outbox_event,transferencia" {
		t.Errorf("tables after migrate = %v", tables)
	}
	if !strings.Contains(out.String(), `"msg":"migrations applied"`) {
		t.Errorf("log = %s", out.String())
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown command", []string{"transfers", "serve"}, map[string]string{"DATABASE_URL": "postgres://x/y"}, "unknown command"},
		{"no database", []string{"transfers"}, map[string]string{}, "DATABASE_URL is required"},
		{"bad log level", []string{"transfers"}, map[string]string{"DATABASE_URL": "postgres://x/y", "LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{"bad log format", []string{"transfers"}, map[string]string{"DATABASE_URL": "postgres://x/y", "LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		{"no authentication", []string{"transfers"}, map[string]string{"DATABASE_URL": "postgres://x/y", "AUTH_JWKS_FILE": "", "AUTH_ISSUER": ""},
			"AUTH_JWKS_URL or AUTH_JWKS_FILE is required"},
		{"a JWKS that is not there", []string{"transfers"}, map[string]string{"DATABASE_URL": "postgres://x/y", "AUTH_JWKS_FILE": "/nonexistent/jwks.json"},
			"AUTH_JWKS_FILE /nonexistent/jwks.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := run(context.Background(), tt.args, withAuth(tt.env), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run = %v, want an error containing %q", err, tt.want)
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
