package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
)

// TestConfigValidate: a service without a usable authentication
// configuration does not start, and says every reason at once.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := auth.Config{JWKSURL: "https://idp.example/jwks", Issuer: "https://idp.example", RateRPS: 1, RateBurst: 1}
	with := func(f func(*auth.Config)) auth.Config { c := ok; f(&c); return c }
	for _, tc := range []struct {
		name string
		cfg  auth.Config
		want []string
	}{
		{"valid", ok, nil},
		{"a file instead", with(func(c *auth.Config) { c.JWKSURL, c.JWKSFile = "", "/etc/jwks.json" }), nil},
		{"nothing", auth.Config{}, []string{"AUTH_JWKS_URL or AUTH_JWKS_FILE is required", "AUTH_ISSUER is required", "RATE_LIMIT_RPS", "RATE_LIMIT_BURST"}},
		{"both", with(func(c *auth.Config) { c.JWKSFile = "/etc/jwks.json" }), []string{"not both"}},
		{"not a URL", with(func(c *auth.Config) { c.JWKSURL = "idp.example/jwks" }), []string{"is not an http(s) URL"}},
		{"NaN rate", with(func(c *auth.Config) { c.RateRPS = math.NaN() }), []string{"RATE_LIMIT_RPS"}},
		{"plain http", with(func(c *auth.Config) { c.JWKSURL = "http://idp.example/jwks" }), []string{"AUTH_JWKS_URL", "must be https://", "DEV_INSECURE_HTTP"}},
		{"plain http in development", with(func(c *auth.Config) { c.JWKSURL, c.InsecureHTTP = "http://idp.example/jwks", true }), nil},
		{"plain http to this machine", with(func(c *auth.Config) { c.JWKSURL = "http://127.0.0.1:8080/jwks" }), nil},
		{"plain http to localhost", with(func(c *auth.Config) { c.JWKSURL = "http://localhost:8080/jwks" }), nil},
		{"plain http to an address", with(func(c *auth.Config) { c.JWKSURL = "http://10.0.0.7/jwks" }), []string{"must be https://"}},
		{"a CA without a URL", with(func(c *auth.Config) { c.JWKSURL, c.JWKSFile, c.JWKSCAFile = "", "/etc/jwks.json", "/etc/ca.pem" }), []string{"AUTH_JWKS_CA_FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != (tc.want == nil) {
				t.Fatalf("Validate() = %v, want errors %q", err, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not say %q", err, w)
				}
			}
		})
	}
}

// TestJWKSOverPlainHTTP: a verifier does not fetch a key set over http://
// from another machine unless DEV_INSECURE_HTTP says so (refused at start,
// before any fetch); http:// to this machine's loopback is allowed, and
// what it redirects to over https is fetched with AUTH_JWKS_CA_FILE's
// trust.
func TestJWKSOverPlainHTTP(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	plain := httptest.NewServer(http.RedirectHandler(iss.URL, http.StatusFound))
	t.Cleanup(plain.Close)
	cfg := iss.Config()
	cfg.JWKSURL = strings.Replace(plain.URL, "127.0.0.1", "idp.invalid", 1) + "/jwks.json"
	if _, err := auth.NewVerifier(t.Context(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "must be https://") {
		t.Errorf("NewVerifier with an http JWKS URL: %v, want an error saying it must be https://", err)
	}
	cfg.InsecureHTTP = true
	if err := cfg.Validate(); err != nil {
		t.Errorf("an http JWKS URL with DEV_INSECURE_HTTP: %v", err)
	}
	cfg = iss.Config()
	cfg.JWKSURL = plain.URL + "/jwks.json"
	v := newVerifier(t, t.Context(), cfg)
	if _, err := v.Verify(t.Context(), iss.Token(t, "client-a")); err != nil {
		t.Errorf("Verify with an http JWKS URL on the loopback: %v", err)
	}
}

// TestAlgorithms: ES256 and RS256 tokens verify against a JWKS file like
// EdDSA ones do; a header naming another algorithm than its key's type is
// refused, as is a JWKS with only a symmetric key.
func TestAlgorithms(t *testing.T) {
	t.Parallel()
	ecRaw, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaRaw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	keys := map[string]jwk.Key{}
	for kid, raw := range map[string]any{"ec": ecRaw, "rsa": rsaRaw} {
		k, err := jwk.Import(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Set(jwk.KeyIDKey, kid); err != nil {
			t.Fatal(err)
		}
		keys[kid] = k
		pub, err := k.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := set.AddKey(pub); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(context.Background(), auth.Config{JWKSFile: file, Issuer: "iss", RateRPS: 1, RateBurst: 1},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	claims, err := json.Marshal(map[string]any{"iss": "iss", "aud": "paysuite", "sub": "c", "exp": time.Now().Add(time.Minute).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	// The RSA key again, under the EC key's kid: a token whose header
	// names an EC key but an RSA algorithm.
	liar, err := jwk.Import(rsaRaw)
	if err != nil {
		t.Fatal(err)
	}
	if err := liar.Set(jwk.KeyIDKey, "ec"); err != nil {
		t.Fatal(err)
	}
	sign := func(alg jwa.SignatureAlgorithm, key jwk.Key, kid string) string {
		h := jws.NewHeaders()
		if err := h.Set(jws.KeyIDKey, kid); err != nil {
			t.Fatal(err)
		}
		tok, err := jws.Sign(claims, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
		if err != nil {
			t.Fatal(err)
		}
		return string(tok)
	}
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"ES256", sign(jwa.ES256(), keys["ec"], "ec"), nil},
		{"RS256", sign(jwa.RS256(), keys["rsa"], "rsa"), nil},
		{"PS256 with an RSA key", sign(jwa.PS256(), keys["rsa"], "rsa"), auth.ErrAlgorithm},
		{"RS256 header naming the EC key", sign(jwa.RS256(), liar, "ec"), auth.ErrAlgorithm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(t.Context(), tc.token)
			if !errors.Is(err, tc.want) {
				t.Errorf("Verify: %v, want %v", err, tc.want)
			}
		})
	}

	sym, err := jwk.Import([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sym.Set(jwk.KeyIDKey, "hmac"); err != nil {
		t.Fatal(err)
	}
	only := jwk.NewSet()
	if err := only.AddKey(sym); err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(only)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.NewVerifier(context.Background(), auth.Config{JWKSFile: file, Issuer: "iss"}, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a JWKS with only a symmetric key was accepted")
	}
}
