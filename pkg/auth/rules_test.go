package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
)

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
