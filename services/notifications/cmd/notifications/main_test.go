package main

import (
	"testing"

	"github.com/paysuite/payments/test/support/helptest"
)

func TestRun(t *testing.T) {
	// migrate creates the log table, on an empty database, twice over.
	dsn := helptest.Migrates(t, run, "notifications", "notification")
	helptest.Runs(t, run, []helptest.Case{
		{Name: "help", Args: []string{"notifications", "--help"}, WantOut: "notifications migrate"},
		{Name: "unknown command", Args: []string{"notifications", "serve-all"}, WantErr: `unknown command ["serve-all"]`},
		// The DLT tooling is the operator CLI's (payments dlt), not a service's.
		{Name: "no dlt command", Args: []string{"notifications", "dlt", "list"}, WantErr: `unknown command ["dlt" "list"]`},
		// migrate checks the configuration as a run does.
		{Name: "migrate with a bad configuration", Args: []string{"notifications", "migrate"},
			Env: map[string]string{"DATABASE_URL": dsn, "NOTIFY_CHANNEL": "carrier-pigeon"}, WantErr: "NOTIFY_CHANNEL"},
		{Name: "bad configuration", Args: []string{"notifications"}, Env: map[string]string{"NOTIFY_CHANNEL": "webhook"},
			WantErr: "DATABASE_URL is required"},
		{Name: "bad log level", Args: []string{"notifications"}, Env: map[string]string{"DATABASE_URL": dsn, "LOG_LEVEL": "loud"}, WantErr: "LOG_LEVEL"},
		{Name: "migrate without database", Args: []string{"notifications", "migrate"}, WantErr: "DATABASE_URL"},
	})
}
