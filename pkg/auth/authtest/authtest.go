// Package authtest is a token issuer for tests: an Ed25519 key whose JWKS
// an httptest server serves (so services fetch and cache it as they would
// an identity provider's), tokens for any client and scopes, and key
// rotation. Each issuer also holds a transfer authorization key
// (pkg/transfersig) in files, so that the services of a test sign and
// verify transfers as a deployment does.
package authtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/transfersig"
)

// Issuer is the iss of the test tokens.
const Issuer = "https://issuer.test"

// AllScopes are every scope of CONTRACTS.md section 8 but contas:depositar,
// which the suite never grants together with transferencias:criar: a test
// that deposits does it as a client of its own, with DepositScopes.
var AllScopes = []string{auth.ScopeTransfersCreate, auth.ScopeTransfersRead, auth.ScopeTransfersRefund, auth.ScopeAccountsAdmin,
	auth.ScopeAccountsRead, auth.ScopeOperations}

// DepositScopes are the scopes of a test's minting client: deposits only.
var DepositScopes = []string{auth.ScopeAccountsDeposit}

// TestIssuer signs tokens and serves its JWKS over HTTPS, as an identity
// provider does: services trust its certificate through CAFile.
type TestIssuer struct {
	// URL is the JWKS URL (AUTH_JWKS_URL), https.
	URL string
	// CAFile holds the server's certificate in PEM (AUTH_JWKS_CA_FILE).
	CAFile string

	mu     sync.Mutex
	key    auth.SigningKey
	priv   jwk.Key
	served []jwk.Key // public keys the JWKS holds
	fetch  atomic.Int64

	transferKey transfersig.Signer
	transferDir string // its key file and public JWKS
}

// New starts an issuer with one key; the server stops at the end of the
// test.
func New(tb testing.TB) *TestIssuer {
	tb.Helper()
	i := &TestIssuer{transferDir: tb.TempDir()}
	if _, err := transfersig.GenerateKey(i.transferDir, i.transferDir); err != nil {
		tb.Fatal(err)
	}
	var err error
	if i.transferKey, err = transfersig.ReadSigner(filepath.Join(i.transferDir, transfersig.KeyFile)); err != nil {
		tb.Fatal(err)
	}
	i.Rotate(tb, false)
	srv := httptest.NewTLSServer(http.HandlerFunc(i.serveJWKS))
	tb.Cleanup(srv.Close)
	i.URL = srv.URL + "/.well-known/jwks.json"
	i.CAFile = filepath.Join(tb.TempDir(), "jwks-ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(i.CAFile, cert, 0o600); err != nil {
		tb.Fatal(err)
	}
	return i
}

func (i *TestIssuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	i.fetch.Add(1)
	i.mu.Lock()
	set := jwk.NewSet()
	for _, k := range i.served {
		_ = set.AddKey(k)
	}
	i.mu.Unlock()
	b, err := json.Marshal(set)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// Fetches is how many times the JWKS was served.
func (i *TestIssuer) Fetches() int64 { return i.fetch.Load() }

// Rotate makes a new signing key and serves its public key; keepOld keeps
// the previous keys in the JWKS too (a rotation's overlap).
func (i *TestIssuer) Rotate(tb testing.TB, keepOld bool) {
	tb.Helper()
	priv, pub := NewKey(tb)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.key = auth.NewSigningKey(priv)
	i.priv = priv
	if !keepOld {
		i.served = nil
	}
	i.served = append(i.served, pub)
}

// NewKey returns a new Ed25519 private JWK with a kid and its public JWK.
func NewKey(tb testing.TB) (jwk.Key, jwk.Key) {
	tb.Helper()
	_, raw, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	priv, err := jwk.Import(raw)
	if err != nil {
		tb.Fatal(err)
	}
	if err := jwk.AssignKeyID(priv); err != nil {
		tb.Fatal(err)
	}
	if err := priv.Set(jwk.AlgorithmKey, jwa.EdDSA()); err != nil {
		tb.Fatal(err)
	}
	pub, err := priv.PublicKey()
	if err != nil {
		tb.Fatal(err)
	}
	return priv, pub
}

// Key returns the current signing key.
func (i *TestIssuer) Key() auth.SigningKey {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.key
}

// Config is an auth configuration trusting this issuer, with a rate limit
// no test reaches and the default token rules and cache.
func (i *TestIssuer) Config() auth.Config {
	return auth.Config{JWKSURL: i.URL, JWKSCAFile: i.CAFile, Issuer: Issuer, Audience: auth.DefaultAudience, RateRPS: 1e6, RateBurst: 1e6,
		MaxTokenLifetime: auth.DefaultMaxTokenLifetime, TokenCacheSize: auth.DefaultTokenCacheSize}
}

// Env returns the AUTH_* and RATE_LIMIT_* variables of Config, and the
// transfer authorization key files (the private key for the transfers
// service, the public JWKS for the ledger), for tests that configure
// services through their environment.
func (i *TestIssuer) Env() map[string]string {
	c := i.Config()
	return map[string]string{
		"AUTH_JWKS_URL":                    c.JWKSURL,
		"AUTH_JWKS_CA_FILE":                c.JWKSCAFile,
		"AUTH_ISSUER":                      c.Issuer,
		"AUTH_AUDIENCE":                    c.Audience,
		"RATE_LIMIT_RPS":                   strconv.FormatFloat(c.RateRPS, 'f', -1, 64),
		"RATE_LIMIT_BURST":                 strconv.Itoa(c.RateBurst),
		"TRANSFERS_AUTHORIZATION_KEY_FILE": filepath.Join(i.transferDir, transfersig.KeyFile),
		"LEDGER_AUTHORIZATION_JWKS_FILE":   filepath.Join(i.transferDir, transfersig.JWKSFile),
	}
}

// TransferKey is the transfer authorization key of Env: what the transfers
// service of the test signs with, for tests that write records as it
// would.
func (i *TestIssuer) TransferKey() transfersig.Signer { return i.transferKey }

// Token returns a token for client with scopes, valid for an hour.
func (i *TestIssuer) Token(tb testing.TB, client string, scopes ...string) string {
	tb.Helper()
	tok, err := i.Key().Sign(auth.Claims{Issuer: Issuer, Audience: auth.DefaultAudience, Subject: client,
		Scopes: scopes, TTL: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// Bearer is "Bearer " + Token(...), for an Authorization header.
func (i *TestIssuer) Bearer(tb testing.TB, client string, scopes ...string) string {
	tb.Helper()
	return "Bearer " + i.Token(tb, client, scopes...)
}

// Authenticator returns an authenticator trusting this issuer, closed at
// the end of the test.
func (i *TestIssuer) Authenticator(tb testing.TB) *auth.Authenticator {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := auth.New(ctx, i.Config(), slog.New(slog.DiscardHandler), nil,
		auth.WithRefusalLimit(auth.RefusalLimit{RPS: 1e6, Burst: 1e6})) // tests refuse many requests from one address
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = a.Close(context.Background())
		cancel()
	})
	return a
}

// WithToken returns h with an Authorization header set on every request
// that has none: for tests that serve a router directly.
func WithToken(h http.Handler, bearer string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", bearer)
		}
		h.ServeHTTP(w, r)
	})
}

// Transport adds an Authorization header to every request that has none.
type Transport struct {
	Bearer string
	Base   http.RoundTripper // http.DefaultTransport when nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", t.Bearer)
	}
	return base.RoundTrip(r)
}

// CheckRoutes fails tb when r has a route that is neither public nor
// mounted with a scope (auth.Uncovered).
func CheckRoutes(tb testing.TB, r chi.Routes) {
	tb.Helper()
	bad, err := auth.Uncovered(r)
	if err != nil {
		tb.Fatal(err)
	}
	for _, rt := range bad {
		tb.Errorf("route %s is neither public nor given a scope: mount it through auth.Mount with a scope", rt)
	}
}

// NewTransferKey returns a new transfer authorization key, for tests that
// build a transfers service by hand.
func NewTransferKey(tb testing.TB) transfersig.Signer {
	tb.Helper()
	k, err := transfersig.NewKey()
	if err != nil {
		tb.Fatal(err)
	}
	return k
}
