package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/test/pgtest"
)

func TestRun(t *testing.T) {
	dsn := pgtest.NewDSN(t) // empty database: "migrate" creates the tables
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantOut string
		wantErr string
	}{
		{name: "help", args: []string{"notifications", "--help"}, wantOut: "notifications migrate"},
		{name: "unknown command", args: []string{"notifications", "serve-all"}, wantErr: `unknown command ["serve-all"]`},
		// The DLT tooling is the operator CLI's (payments dlt), not a service's.
		{name: "no dlt command", args: []string{"notifications", "dlt", "list"}, wantErr: `unknown command ["dlt" "list"]`},
		// migrate checks the configuration as a run does.
		{name: "migrate with a bad configuration", args: []string{"notifications", "migrate"},
			env: map[string]string{"DATABASE_URL": dsn, "NOTIFY_CHANNEL": "carrier-pigeon"}, wantErr: "NOTIFY_CHANNEL"},
		{name: "bad configuration", args: []string{"notifications"}, env: map[string]string{"NOTIFY_CHANNEL": "webhook"},
			wantErr: "DATABASE_URL is required"},
		{name: "bad log level", args: []string{"notifications"}, env: map[string]string{"DATABASE_URL": dsn, "LOG_LEVEL": "loud"}, wantErr: "LOG_LEVEL"},
		{name: "migrate without database", args: []string{"notifications", "migrate"}, wantErr: "DATABASE_URL"},
		{name: "migrate", args: []string{"notifications", "migrate"}, env: map[string]string{"DATABASE_URL": dsn}, wantOut: "migrations applied"},
		{name: "migrate again", args: []string{"notifications", "migrate"}, env: map[string]string{"DATABASE_URL": dsn}, wantOut: "migrations applied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, withAuth(tt.env), &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run(%q) = %v, want an error mentioning %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run(%q) = %v", tt.args, err)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("output lacks %q:\n%s", tt.wantOut, out.String())
			}
		})
	}
	t.Run("migrate created the log table", func(t *testing.T) {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(context.Background()) }()
		var table *string
		if err := conn.QueryRow(context.Background(), `SELECT to_regclass('notification')::text`).Scan(&table); err != nil || table == nil {
			t.Fatalf("notification table: %v, %v", table, err)
		}
	})
}

// withAuth adds a valid authentication configuration to env, so that a case
// fails only for what it sets.
func withAuth(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return map[string]string{"AUTH_JWKS_FILE": "/etc/paysuite/jwks.json", "AUTH_ISSUER": "https://issuer.example"}[k]
	}
}
