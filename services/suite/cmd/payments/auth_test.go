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

// TestAuthKeygenJWKSOut: --jwks-out copies the public JWKS, and only it,
// into another directory, on the run that makes the key and on every --keep
// run after (a fresh public volume is filled from an existing key); the
// copy verifies the key's tokens. A JWKS holding a private key is not
// copied, and --jwks-out equal to --out is refused.
func TestAuthKeygenJWKSOut(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir, pub := filepath.Join(base, "key"), filepath.Join(base, "public")
	for run := range 2 {
		if err := os.RemoveAll(pub); err != nil {
			t.Fatal(err)
		}
		if code, _, _, err := runCLI(t, nil, "auth", "keygen", "--out", dir, "--jwks-out", pub, "--keep"); code != 0 {
			t.Fatalf("keygen run %d: exit %d: %v", run, code, err)
		}
		entries, err := os.ReadDir(pub)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if diff := cmp.Diff([]string{auth.JWKSFile}, names); diff != "" {
			t.Fatalf("run %d: the public directory holds (-want +got):\n%s", run, diff)
		}
		want, err := os.ReadFile(filepath.Join(dir, auth.JWKSFile))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(pub, auth.JWKSFile))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("run %d: the copy differs from the key's JWKS", run)
		}
	}
	code, token, _, err := runCLI(t, map[string]string{"AUTH_AUDIENCE": "paysuite"}, "auth", "token", "--client", "loja-1",
		"--scopes", "transferencias:ler", "--key", filepath.Join(dir, auth.KeyFile))
	if code != 0 {
		t.Fatalf("token: exit %d: %v", code, err)
	}
	v, err := auth.NewVerifier(context.Background(), auth.Config{JWKSFile: filepath.Join(pub, auth.JWKSFile), Issuer: auth.DevIssuer,
		RateRPS: 1, RateBurst: 1}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), strings.TrimSpace(token)); err != nil {
		t.Fatalf("the copied JWKS does not verify the key's token: %v", err)
	}

	if code, _, _, err := runCLI(t, nil, "auth", "keygen", "--out", dir, "--jwks-out", dir+"/", "--keep"); code != 2 || err == nil {
		t.Errorf("--jwks-out = --out: exit %d, err %v; want a usage error", code, err)
	}

	// A "JWKS" that is the private key itself: refused, nothing copied.
	bad := filepath.Join(base, "bad")
	if err := os.MkdirAll(bad, 0o700); err != nil {
		t.Fatal(err)
	}
	priv, err := os.ReadFile(filepath.Join(dir, auth.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, auth.KeyFile), priv, 0o600); err != nil { //nolint:gosec // a test temp dir
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, auth.JWKSFile), []byte(`{"keys":[`+string(priv)+`]}`), 0o600); err != nil { //nolint:gosec // a test temp dir
		t.Fatal(err)
	}
	leak := filepath.Join(base, "leak")
	if code, _, _, err := runCLI(t, nil, "auth", "keygen", "--out", bad, "--jwks-out", leak, "--keep"); code != 1 || err == nil || !strings.Contains(err.Error(), "private key") {
		t.Errorf("a JWKS holding a private key: exit %d, err %v; want 1 and a refusal", code, err)
	}
	if _, err := os.Stat(filepath.Join(leak, auth.JWKSFile)); !os.IsNotExist(err) {
		t.Errorf("a JWKS holding a private key was copied (stat: %v)", err)
	}
}
