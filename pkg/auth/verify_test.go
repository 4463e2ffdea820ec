package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
