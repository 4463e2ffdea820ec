package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/services/suite"
)

// TestDemoPrintsConsoleAndToken: "payments-dev demo" (make demo) prints the
// console's URL and a sign-in token that verifies with the operacoes
// scope, and its refunds ran with the refund token it minted, on the real PostgreSQL (kfake for Kafka, as make demo runs).
func TestDemoPrintsConsoleAndToken(t *testing.T) {
	dbURL := os.Getenv("TEST_DATABASE_URL")
	if dbURL == "" {
		t.Fatal("TEST_DATABASE_URL is not set: run with the test infrastructure (test/infra/with-infra.sh)")
	}
	dir := filepath.Join(t.TempDir(), "auth")
	if _, _, err := auth.EnsureKey(dir); err != nil {
		t.Fatalf("keygen: %v", err)
	}
	env := map[string]string{
		"DATABASE_URL":   dbURL,
		"AUTH_JWKS_FILE": filepath.Join(dir, auth.JWKSFile),
		"AUTH_ISSUER":    auth.DevIssuer,
		"LOG_LEVEL":      "error",
	}
	for _, s := range []string{"TRANSFERS", "LEDGER", "ANTIFRAUD", "NOTIFICATIONS", "CONSOLE"} {
		env[s+"_HTTP_ADDR"] = "127.0.0.1:0"
	}
	code, stdout, stderr, err := runCLI(t, env, "demo", "--exit", "--key", filepath.Join(dir, auth.KeyFile))
	if code != 0 {
		t.Fatalf("demo: exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if !regexp.MustCompile(`partial refund\s+LIQUIDADO 10000 at \S+  ok`).MatchString(stdout) {
		t.Errorf("the demo's output does not show its partial refund settled:\n%s", stdout)
	}
	m := regexp.MustCompile(`Console:    open (http://127\.0\.0\.1:\d+) and paste this sign-in token[^\n]*\n(\S+)\n`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no console URL and token in the demo's output:\n%s", stdout)
	}
	if !strings.Contains(stdout, "console        "+m[1]) {
		t.Errorf("the Ready list does not name the console at %s:\n%s", m[1], stdout)
	}
	v, err := auth.NewVerifier(context.Background(), auth.Config{JWKSFile: filepath.Join(dir, auth.JWKSFile), Issuer: auth.DevIssuer,
		RateRPS: 1, RateBurst: 1}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(context.Background(), m[2])
	if err != nil {
		t.Fatalf("the printed token does not verify: %v", err)
	}
	if p.Subject != suite.OperatorClient || !p.Operator() {
		t.Errorf("principal = %+v, want %s with operacoes", p, suite.OperatorClient)
	}
}
