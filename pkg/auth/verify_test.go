package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
)

// TestVerifyReasons: each bad token is refused for its own reason, so the
// 401's detail tells the client what to fix.
func TestVerifyReasons(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	v := iss.Authenticator(t).Verifier()
	want := map[string]error{
		"empty bearer":                         auth.ErrMalformed,
		"garbage":                              auth.ErrMalformed,
		"garbage in three parts":               auth.ErrMalformed,
		"100 KB token":                         auth.ErrTokenTooLarge,
		"alg none":                             auth.ErrAlgorithm,
		"HS256 keyed with the public key":      auth.ErrAlgorithm,
		"valid signature, kid not in the JWKS": auth.ErrUnknownKey,
		"tampered payload":                     auth.ErrSignature,
		"expired":                              auth.ErrExpired,
		"nbf in the future":                    auth.ErrNotYetValid,
		"iat in the future":                    auth.ErrNotYetValid,
		"wrong iss":                            auth.ErrIssuer,
		"wrong aud":                            auth.ErrAudience,
		"missing exp":                          auth.ErrMissingClaim,
		"missing sub":                          auth.ErrMissingClaim,
		"empty sub":                            auth.ErrMissingClaim,
		"two Authorization values":             auth.ErrMalformed,
		"lifetime over the maximum":            auth.ErrLifetime,
	}
	for _, tc := range iss.BadAuthorizations(t) {
		w, ok := want[tc.Name]
		if !ok {
			continue // no bearer token at all: the middleware's case
		}
		t.Run(tc.Name, func(t *testing.T) {
			_, err := v.Verify(t.Context(), strings.TrimPrefix(tc.Authorization, "Bearer "))
			if !errors.Is(err, w) {
				t.Errorf("Verify: %v, want %v", err, w)
			}
		})
	}
	p, err := v.Verify(t.Context(), iss.Token(t, "client-a", "contas:ler", "operacoes"))
	if err != nil || p.Subject != "client-a" || !p.Has("operacoes") || p.Has("contas:admin") {
		t.Errorf("good token: %+v, %v", p, err)
	}
	now := time.Now()
	for name, claims := range map[string]map[string]any{
		"scope as a list": {"scope": []string{"contas:ler", "operacoes"}},
		"scp (Entra ID)":  {"scp": "contas:ler operacoes"},
		"scp as a list":   {"scp": []string{"contas:ler", "operacoes"}},
	} {
		claims["iss"], claims["aud"], claims["sub"], claims["exp"] = authtest.Issuer, "paysuite", "client-a", now.Add(time.Minute).Unix()
		p, err := v.Verify(t.Context(), iss.SignClaims(t, claims))
		if diff := cmp.Diff([]string{"contas:ler", "operacoes"}, p.Scopes); err != nil || diff != "" {
			t.Errorf("%s: %v, scopes mismatch (-want +got):\n%s", name, err, diff)
		}
	}
	if _, err := v.Verify(t.Context(), iss.SignClaims(t, map[string]any{"iss": authtest.Issuer, "aud": "paysuite", "sub": "c",
		"exp": now.Add(time.Minute).Unix(), "scope": 42})); !errors.Is(err, auth.ErrClaims) {
		t.Errorf("a numeric scope: %v, want ErrClaims", err)
	}
}

// TestMaxTokenLifetime: a token claiming a lifetime (exp - iat) over
// AUTH_MAX_TOKEN_LIFETIME is refused; without iat, exp - now is the
// lifetime; a token at the maximum is accepted.
func TestMaxTokenLifetime(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	cfg := iss.Config()
	cfg.MaxTokenLifetime = 2 * time.Hour
	v := newVerifier(t, context.Background(), cfg)
	now := time.Now()
	for _, tc := range []struct {
		name string
		iat  time.Time // zero: no iat
		exp  time.Time
		want error
	}{
		{"at the maximum", now, now.Add(2 * time.Hour), nil},
		{"a second over", now, now.Add(2*time.Hour + time.Second), auth.ErrLifetime},
		{"a year", now, now.Add(366 * 24 * time.Hour), auth.ErrLifetime},
		{"issued an hour ago, over the maximum in all", now.Add(-time.Hour), now.Add(90 * time.Minute), auth.ErrLifetime},
		{"no iat, exp within the maximum", time.Time{}, now.Add(2 * time.Hour), nil},
		{"no iat, exp beyond the maximum", time.Time{}, now.Add(3 * time.Hour), auth.ErrLifetime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims := map[string]any{"iss": authtest.Issuer, "aud": "paysuite", "sub": "client-a", "exp": tc.exp.Unix()}
			if !tc.iat.IsZero() {
				claims["iat"] = tc.iat.Unix()
			}
			tok := iss.SignClaims(t, claims)
			var err error
			for range 2 { // fresh, then from the cache when accepted
				_, err = v.Verify(t.Context(), tok)
				if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
					t.Errorf("Verify: %v, want %v", err, tc.want)
				}
			}
			if tc.want != nil && !errors.Is(err, auth.ErrClaims) {
				t.Errorf("a lifetime refusal is not an invalid claim: %v", err)
			}
		})
	}
	if err := (auth.Config{JWKSFile: "f", Issuer: "i", RateRPS: 1, RateBurst: 1, MaxTokenLifetime: -time.Second}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "AUTH_MAX_TOKEN_LIFETIME") {
		t.Errorf("a negative AUTH_MAX_TOKEN_LIFETIME: %v", err)
	}
}

// TestRequiredType: with AUTH_REQUIRED_TYP=at+jwt, the suite's own tokens
// (typ at+jwt) and application/at+jwt pass; JWT, no typ, and an ID token's
// typ are refused. Without it any typ passes.
func TestRequiredType(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	verifier := func(typ string) *auth.Verifier {
		cfg := iss.Config()
		cfg.RequiredType = typ
		return newVerifier(t, context.Background(), cfg)
	}
	strict, lax := verifier("at+jwt"), verifier("")
	withTyp := func(typ string) string {
		claims := claimsWith("sub", "client-a")
		return iss.SignTyped(t, claims, typ)
	}
	own := iss.Token(t, "client-a", auth.ScopeTransfersCreate)
	for _, tc := range []struct {
		name, token string
		strict      error
	}{
		{"the suite's own token", own, nil},
		{"application/at+jwt", withTyp("application/AT+JWT"), nil},
		{"JWT", withTyp("JWT"), auth.ErrType},
		{"no typ", withTyp(""), auth.ErrType},
	} {
		for name, v := range map[string]*auth.Verifier{"strict": strict, "lax": lax} {
			want := tc.strict
			if name == "lax" {
				want = nil
			}
			_, err := v.Verify(t.Context(), tc.token)
			if !errors.Is(err, want) || (want == nil) != (err == nil) {
				t.Errorf("%s, %s: %v, want %v", tc.name, name, err, want)
			}
		}
	}
	msg, err := jws.Parse([]byte(own))
	if err != nil {
		t.Fatal(err)
	}
	if typ, _ := msg.Signatures()[0].ProtectedHeaders().Type(); typ != auth.AccessTokenType {
		t.Errorf("the suite's own token has typ %q, want %q", typ, auth.AccessTokenType)
	}
}

// TestJWKSRefreshedOnUnknownKid: the JWKS is fetched once at start and
// cached; a token naming a kid the cache lacks refetches it, but a flood of
// unknown kids costs at most one fetch per auth.RefreshInterval.
func TestJWKSRefreshedOnUnknownKid(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := newVerifier(t, ctx, iss.Config())
	now := time.Now()
	auth.SetClock(v, func() time.Time { return now })
	verify := func(tok string) error {
		_, err := v.Verify(ctx, tok)
		return err
	}
	fetches := func(want int64) {
		t.Helper()
		if got := iss.Fetches(); got != want {
			t.Errorf("JWKS fetched %d times, want %d", got, want)
		}
	}

	first := iss.Token(t, "client-a", "contas:ler")
	for range 5 {
		if err := verify(first); err != nil {
			t.Fatalf("first key: %v", err)
		}
	}
	fetches(1) // at start, then from the cache

	iss.Rotate(t, false) // the provider replaces its key
	second := iss.Token(t, "client-a", "contas:ler")
	if err := verify(second); err != nil {
		t.Fatalf("after a rotation, the new key's token: %v", err)
	}
	fetches(2)
	if err := verify(first); !errors.Is(err, auth.ErrUnknownKey) {
		t.Errorf("the retired key's token: %v, want auth.ErrUnknownKey", err)
	}

	iss.Rotate(t, true) // another rotation within auth.RefreshInterval
	third := iss.Token(t, "client-a", "contas:ler")
	for range 10 {
		if err := verify(third); !errors.Is(err, auth.ErrUnknownKey) {
			t.Fatalf("a new kid within %v of the last refresh: %v, want auth.ErrUnknownKey", auth.RefreshInterval, err)
		}
	}
	fetches(2)

	now = now.Add(auth.RefreshInterval)
	if err := verify(third); err != nil {
		t.Errorf("a new kid %v after the last refresh: %v", auth.RefreshInterval, err)
	}
	if err := verify(second); err != nil {
		t.Errorf("the overlapping old key after the refresh: %v", err)
	}
	fetches(3)
}

// TestJWKSUnavailable: a JWKS URL that does not answer does not stop the
// service from starting; tokens then get auth.ErrKeysUnavailable (a 503), not
// a 401 that would blame the client.
func TestJWKSUnavailable(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	cfg := iss.Config()
	cfg.JWKSURL = "https://127.0.0.1:1/jwks.json"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := newVerifier(t, ctx, cfg)
	if _, err := v.Verify(ctx, iss.Token(t, "client-a")); !errors.Is(err, auth.ErrKeysUnavailable) {
		t.Errorf("Verify with no JWKS: %v, want auth.ErrKeysUnavailable", err)
	}
}

// TestVerifyAfterContextEnds: a service's context is cancelled before its
// HTTP server has drained; the requests still in flight verify their
// tokens against the cached JWKS until Close (they once got a 500 from a
// panic inside the stopped cache).
func TestVerifyAfterContextEnds(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	v, err := auth.NewVerifier(ctx, iss.Config(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tok := iss.Token(t, "client-a", "contas:ler")
	cancel()
	for range 3 {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := v.Verify(rctx, tok)
		rcancel()
		if err != nil {
			t.Fatalf("Verify after the service's context ended: %v", err)
		}
	}
	if err := v.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
