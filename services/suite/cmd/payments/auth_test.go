package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/transfersig"
)

// TestAuthKeygenAndToken: keygen writes a private key only its owner can
// read and a public JWKS; token prints one token and nothing else, which
// a verifier trusting that JWKS accepts with the client and scopes asked.
func TestAuthKeygenAndToken(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	if code, _, _, err := runCLI(t, nil, "auth", "keygen", "--out", dir); code != 0 {
		t.Fatalf("keygen: exit %d: %v", code, err)
	}
	st, err := os.Stat(filepath.Join(dir, auth.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("signing key mode = %v, want 0600", st.Mode().Perm())
	}
	if code, _, _, err := runCLI(t, nil, "auth", "keygen", "--out", dir); code != 1 || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second keygen: exit %d, err %v; want 1 and a refusal to overwrite", code, err)
	}
	code, stdout, stderr, err := runCLI(t, map[string]string{"AUTH_AUDIENCE": "paysuite"}, "auth", "token", "--client", "loja-1",
		"--scopes", "transferencias:criar, transferencias:ler", "--ttl", "10m", "--key", filepath.Join(dir, auth.KeyFile))
	if code != 0 {
		t.Fatalf("token: exit %d: %v", code, err)
	}
	if strings.Count(stdout, "\n") != 1 || strings.Count(stdout, ".") != 2 || stderr != "" {
		t.Fatalf("token printed more than one token: stdout %q stderr %q", stdout, stderr)
	}
	v, err := auth.NewVerifier(context.Background(), auth.Config{JWKSFile: filepath.Join(dir, auth.JWKSFile), Issuer: auth.DevIssuer,
		RateRPS: 1, RateBurst: 1}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(context.Background(), strings.TrimSpace(stdout))
	if err != nil {
		t.Fatalf("the token does not verify: %v", err)
	}
	want := auth.Principal{Subject: "loja-1", Scopes: []string{"transferencias:criar", "transferencias:ler"}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("principal mismatch (-want +got):\n%s", diff)
	}
}

// TestTransferKeygen: transfer-keygen writes the private key, readable by
// its owner only, where the transfers service reads it and the public
// JWKS where the ledger does; what the key signs, the JWKS verifies; a
// second run refuses to overwrite, unless --keep, which keeps the key.
func TestTransferKeygen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	private, public := filepath.Join(dir, "transfers"), filepath.Join(dir, "ledger")
	if code, _, _, err := runCLI(t, nil, "auth", "transfer-keygen", "--out", private, "--public-out", public); code != 0 {
		t.Fatalf("transfer-keygen: exit %d: %v", code, err)
	}
	if st, err := os.Stat(filepath.Join(private, transfersig.KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v, %v; want mode 0600", st, err)
	}
	if _, err := os.Stat(filepath.Join(public, transfersig.KeyFile)); err == nil {
		t.Error("the private key was written to the public directory")
	}
	key, err := transfersig.ReadSigner(filepath.Join(private, transfersig.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := transfersig.ReadVerifier(filepath.Join(public, transfersig.JWKSFile))
	if err != nil {
		t.Fatal(err)
	}
	claim := transfersig.Claim{Source: "A", Destination: "B", AmountCents: 1, Currency: "BRL", Client: "c"}
	if err := keys.Verify(claim, key.Sign(claim)); err != nil {
		t.Errorf("the JWKS does not verify the key's signature: %v", err)
	}
	if code, _, _, err := runCLI(t, nil, "auth", "transfer-keygen", "--out", private, "--public-out", public); code != 1 || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second transfer-keygen: exit %d, err %v; want 1 and a refusal to overwrite", code, err)
	}
	if code, out, _, err := runCLI(t, nil, "auth", "transfer-keygen", "--out", private, "--public-out", public, "--keep"); code != 0 ||
		!strings.Contains(out, "already has") {
		t.Errorf("transfer-keygen --keep: exit %d, %q, %v", code, out, err)
	}
	if again, err := transfersig.ReadSigner(filepath.Join(private, transfersig.KeyFile)); err != nil || again.KeyID() != key.KeyID() {
		t.Errorf("--keep replaced the key: %v", err)
	}
}

// TestAuthTokenTTLCap: --ttl is capped at the longest lifetime the
// services accept (AUTH_MAX_TOKEN_LIFETIME, default 24h), with an error
// that says so; a token at the cap verifies.
func TestAuthTokenTTLCap(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	if code, _, _, err := runCLI(t, nil, "auth", "keygen", "--out", dir); code != 0 {
		t.Fatalf("keygen: exit %d: %v", code, err)
	}
	key := filepath.Join(dir, auth.KeyFile)
	for _, tc := range []struct {
		name string
		env  map[string]string
		ttl  string
		want int
		says string
	}{
		{"the default cap", nil, "24h", 0, ""},
		{"over the default cap", nil, "25h", 2, "AUTH_MAX_TOKEN_LIFETIME"},
		{"a year", nil, "8784h", 2, "24h"},
		{"a lower cap", map[string]string{"AUTH_MAX_TOKEN_LIFETIME": "1h"}, "2h", 2, "1h0m0s"},
		{"a higher cap", map[string]string{"AUTH_MAX_TOKEN_LIFETIME": "48h"}, "48h", 0, ""},
		{"a bad cap", map[string]string{"AUTH_MAX_TOKEN_LIFETIME": "soon"}, "1h", 1, "AUTH_MAX_TOKEN_LIFETIME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, _, err := runCLI(t, tc.env, "auth", "token", "--client", "loja-1", "--scopes", "transferencias:criar",
				"--ttl", tc.ttl, "--key", key)
			if code != tc.want || (tc.says != "" && !strings.Contains(fmt.Sprint(err), tc.says)) {
				t.Fatalf("--ttl %s: exit %d (%v), want %d saying %q", tc.ttl, code, err, tc.want, tc.says)
			}
			if code != 0 {
				return
			}
			cfg := auth.Config{JWKSFile: filepath.Join(dir, auth.JWKSFile), Issuer: auth.DevIssuer, RateRPS: 1, RateBurst: 1}
			if tc.env != nil {
				cfg.MaxTokenLifetime, _ = time.ParseDuration(tc.env["AUTH_MAX_TOKEN_LIFETIME"])
			}
			v, err := auth.NewVerifier(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(context.Background(), strings.TrimSpace(stdout)); err != nil {
				t.Errorf("a token at the cap does not verify: %v", err)
			}
		})
	}
}
