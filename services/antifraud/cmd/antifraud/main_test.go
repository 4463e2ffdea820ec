package main

import (
	"testing"

	"github.com/paysuite/payments/test/support/helptest"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	helptest.Migrates(t, run, "antifraud", "decision", "outbox_event", "inbox_event")
}

func TestRunRejectsBadInvocations(t *testing.T) {
	t.Parallel()
	helptest.Runs(t, run, []helptest.Case{
		{Name: "unknown subcommand", Args: []string{"antifraud", "serve"}, WantErr: "usage"},
		{Name: "extra argument", Args: []string{"antifraud", "migrate", "now"}, WantErr: "usage"},
		{Name: "no database", Args: []string{"antifraud"}, WantErr: "DATABASE_URL is required"},
		{Name: "bad threshold", Args: []string{"antifraud"}, Env: map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/a",
			"ANTIFRAUD_BLOCK_THRESHOLD": "eighty"}, WantErr: "ANTIFRAUD_BLOCK_THRESHOLD"},
		{Name: "bad log level", Args: []string{"antifraud"}, Env: map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/a",
			"LOG_LEVEL": "loud"}, WantErr: "LOG_LEVEL"},
	})
}
