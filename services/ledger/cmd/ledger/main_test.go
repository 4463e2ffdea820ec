package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/paysuite/payments/test/ledgertest"
	"github.com/paysuite/payments/test/pgtest"
)

func TestRunRejectsBadInvocations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"unknown command", []string{"ledger", "serve"}, map[string]string{"DATABASE_URL": "x"}, "usage"},
		{"extra argument", []string{"ledger", "migrate", "now"}, map[string]string{"DATABASE_URL": "x"}, "usage"},
		{"no database", []string{"ledger"}, map[string]string{}, "DATABASE_URL"},
		{"bad log level", []string{"ledger"}, map[string]string{"DATABASE_URL": "x", "LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{"bad log format", []string{"ledger"}, map[string]string{"DATABASE_URL": "x", "LOG_FORMAT": "xml"}, "LOG_FORMAT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), tc.args, withAuth(tc.env), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("run = %v, want an error mentioning %s", err, tc.wantErr)
			}
		})
	}
}

func TestMigrateAppliesTheLedgerSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t) // empty database
	var out bytes.Buffer
	env := map[string]string{"DATABASE_URL": dsn, "LOG_FORMAT": "json"}
	if err := run(context.Background(), []string{"ledger", "migrate"}, withAuth(env), &out); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if !strings.Contains(out.String(), "migrations applied") {
		t.Errorf("log = %q", out.String())
	}
	db := ledgertest.OpenDB(t, dsn)
	for _, table := range []string{"account", "posting", "processed_transfer", "deposit", "outbox_event"} {
		var exists bool
		if err := db.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil || !exists {
			t.Errorf("table %s missing after migrate (err %v)", table, err)
		}
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
