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
		{name: "unknown command", args: []string{"notifications", "serve-all"}, wantErr: `unknown command "serve-all"`},
		{name: "dlt help", args: []string{"notifications", "dlt", "list", "--help"}, wantOut: "Usage: dlt list"},
		{name: "dlt without command", args: []string{"notifications", "dlt"}, wantErr: "a command is required"},
		{name: "bad configuration", args: []string{"notifications"}, env: map[string]string{"NOTIFY_CHANNEL": "webhook"},
			wantErr: "DATABASE_URL is required"},
		{name: "bad log level", args: []string{"notifications"}, env: map[string]string{"LOG_LEVEL": "loud"}, wantErr: "LOG_LEVEL"},
		{name: "migrate without database", args: []string{"notifications", "migrate"}, wantErr: "DATABASE_URL"},
		{name: "migrate", args: []string{"notifications", "migrate"}, env: map[string]string{"DATABASE_URL": dsn}, wantOut: "migrations applied"},
		{name: "migrate again", args: []string{"notifications", "migrate"}, env: map[string]string{"DATABASE_URL": dsn}, wantOut: "migrations applied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, &out)
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
