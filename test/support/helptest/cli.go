package helptest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/test/support/pgtest"
)

// ServiceVars are the --help lines every service with a database has
// besides its own variables: the HTTP address (addr, its default), the
// database, the logger's, the outbox and shutdown settings, the
// Kafka SASL secret file and the rate limit, with the defaults a reader
// expects.
func ServiceVars(addr string) []envconfig.Var {
	return []envconfig.Var{
		{Name: "HTTP_ADDR", Default: addr}, {Name: "DATABASE_URL", Default: "(required)"}, {Name: "LOG_LEVEL", Default: "info"},
		{Name: "LOG_FORMAT"}, {Name: "OUTBOX_LEASE", Default: "30s"},
		{Name: "SHUTDOWN_DRAIN", Default: "5s"}, {Name: "KAFKA_SASL_PASSWORD_FILE"}, {Name: "RATE_LIMIT_RPS", Default: "50"},
	}
}

// WithAuth is env plus the authentication configuration every service
// requires, and the transfer authorization key files of the transfers
// service and the ledger (files are only read when a service runs), so
// that a case fails only for what it sets. A key env holds, even empty,
// wins.
func WithAuth(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return map[string]string{"AUTH_JWKS_FILE": "/etc/paysuite/jwks.json", "AUTH_ISSUER": "https://issuer.example",
			"TRANSFERS_AUTHORIZATION_KEY_FILE": "/etc/paysuite/transfer-authorization-key.jwk",
			"LEDGER_AUTHORIZATION_JWKS_FILE":   "/etc/paysuite/transfer-authorization-jwks.json"}[k]
	}
}

// Case is one invocation of a binary: its arguments and environment (on
// top of WithAuth) and what it must do: fail with an error that mentions
// WantErr, or, with WantErr empty, succeed and print WantOut.
type Case struct {
	Name    string
	Args    []string
	Env     map[string]string
	WantErr string
	WantOut string
}

// Runs runs each case in order, one subtest each (in order, so a case may
// rely on what an earlier one did, such as a migrated database).
func Runs(t *testing.T, run Run, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tc.Args, WithAuth(tc.Env), &out)
			if tc.WantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.WantErr) {
					t.Fatalf("run(%q) = %v, want an error mentioning %q", tc.Args, err, tc.WantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run(%q) = %v", tc.Args, err)
			}
			if !strings.Contains(out.String(), tc.WantOut) {
				t.Errorf("run(%q) output lacks %q:\n%s", tc.Args, tc.WantOut, out.String())
			}
		})
	}
}

// Migrates runs "name migrate" twice on an empty database (applying the
// migrations again changes nothing) and fails t unless both runs succeed,
// the JSON log says the migrations were applied and every one of tables
// exists afterwards. It returns the database's URL.
func Migrates(t *testing.T, run Run, name string, tables ...string) string {
	t.Helper()
	dsn := pgtest.NewDSN(t) // an empty database
	env := map[string]string{"DATABASE_URL": dsn, "LOG_FORMAT": "json"}
	var out bytes.Buffer
	for range 2 {
		if err := run(context.Background(), []string{name, "migrate"}, WithAuth(env), &out); err != nil {
			t.Fatalf("%s migrate: %v", name, err)
		}
	}
	if !strings.Contains(out.String(), `"msg":"migrations applied"`) {
		t.Errorf("log %q does not say the migrations were applied", out.String())
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for _, table := range tables {
		var exists bool
		if err := conn.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil || !exists {
			t.Errorf("table %s missing after migrate (err %v)", table, err)
		}
	}
	return dsn
}
