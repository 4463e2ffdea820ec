package main

import (
	"testing"

	"github.com/paysuite/payments/test/support/helptest"
)

func TestRunRejectsBadInvocations(t *testing.T) {
	t.Parallel()
	helptest.Runs(t, run, []helptest.Case{
		{Name: "unknown command", Args: []string{"ledger", "serve"}, Env: map[string]string{"DATABASE_URL": "x"}, WantErr: "usage"},
		{Name: "extra argument", Args: []string{"ledger", "migrate", "now"}, Env: map[string]string{"DATABASE_URL": "x"}, WantErr: "usage"},
		{Name: "no database", Args: []string{"ledger"}, Env: map[string]string{}, WantErr: "DATABASE_URL"},
		{Name: "bad log level", Args: []string{"ledger"}, Env: map[string]string{"DATABASE_URL": "x", "LOG_LEVEL": "loud"}, WantErr: "LOG_LEVEL"},
		{Name: "bad log format", Args: []string{"ledger"}, Env: map[string]string{"DATABASE_URL": "x", "LOG_FORMAT": "xml"}, WantErr: "LOG_FORMAT"},
	})
}

func TestMigrateAppliesTheLedgerSchema(t *testing.T) {
	t.Parallel()
	helptest.Migrates(t, run, "ledger", "account", "posting", "processed_transfer", "deposit", "outbox_event")
}
