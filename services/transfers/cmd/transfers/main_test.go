package main

import (
	"testing"

	"github.com/paysuite/payments/test/support/helptest"
)

func TestMigrateSubcommand(t *testing.T) {
	t.Parallel()
	helptest.Migrates(t, run, "transfers", "transferencia", "outbox_event", "inbox_event")
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	helptest.Runs(t, run, []helptest.Case{
		{Name: "unknown command", Args: []string{"transfers", "serve"}, Env: map[string]string{"DATABASE_URL": "postgres://x/y"}, WantErr: "unknown command"},
		{Name: "no database", Args: []string{"transfers"}, Env: map[string]string{}, WantErr: "DATABASE_URL is required"},
		{Name: "bad log level", Args: []string{"transfers"}, Env: map[string]string{"DATABASE_URL": "postgres://x/y", "LOG_LEVEL": "loud"}, WantErr: "LOG_LEVEL"},
		{Name: "bad log format", Args: []string{"transfers"}, Env: map[string]string{"DATABASE_URL": "postgres://x/y", "LOG_FORMAT": "xml"}, WantErr: "LOG_FORMAT"},
		{Name: "no authentication", Args: []string{"transfers"}, Env: map[string]string{"DATABASE_URL": "postgres://x/y", "AUTH_JWKS_FILE": "", "AUTH_ISSUER": ""},
			WantErr: "AUTH_JWKS_URL or AUTH_JWKS_FILE is required"},
		{Name: "a JWKS that is not there", Args: []string{"transfers"}, Env: map[string]string{"DATABASE_URL": "postgres://x/y", "AUTH_JWKS_FILE": "/nonexistent/jwks.json"},
			WantErr: "AUTH_JWKS_FILE /nonexistent/jwks.json"},
	})
}
