package authtest

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/paysuite/payments/pkg/auth"
)

// Challenges of a 401 (CONTRACTS.md section 8).
const (
	ChallengeMissing = `Bearer realm="paysuite"`
	ChallengeInvalid = `Bearer realm="paysuite", error="invalid_token"`
)

// BadCase is an Authorization header the suite must refuse with 401.
type BadCase struct {
	Name string
	// Authorization is the header's value; "" sends none.
	Authorization string
	// Challenge is the WWW-Authenticate header wanted.
	Challenge string
}

// BadAuthorizations are the bad bearer inputs every service refuses with a
// 401, made against this
// issuer's keys: no header, another scheme, an empty bearer, garbage, a
// 100 KB token, alg none, HS256 keyed with the public key's bytes, a good
// signature by a key the JWKS does not have, a tampered payload, and
// tokens that are expired, not yet valid, for another issuer or audience,
// without exp or sub, or living longer than auth.DefaultMaxTokenLifetime.
func (i *TestIssuer) BadAuthorizations(tb testing.TB) []BadCase {
	tb.Helper()
	now := time.Now()
	good := map[string]any{"iss": Issuer, "aud": []string{auth.DefaultAudience}, "sub": "client-a",
		"scope": strings.Join(AllScopes, " "), "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for key, val := range good {
			m[key] = val
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	priv := i.Key()
	kid := priv.KeyID()
	pub := i.publicJSON(tb)

	valid := i.SignClaims(tb, good)
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + b64(tb, with("sub", "client-b")) + "." + parts[2]

	none := b64(tb, map[string]any{"alg": "none", "kid": kid, "typ": "JWT"}) + "." + b64(tb, good) + "."

	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.KeyIDKey, kid); err != nil {
		tb.Fatal(err)
	}
	payload, err := json.Marshal(good)
	if err != nil {
		tb.Fatal(err)
	}
	hs256, err := jws.Sign(payload, jws.WithKey(jwa.HS256(), pub, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		tb.Fatal(err)
	}

	stranger, _ := NewKey(tb)
	unknownKid := signClaims(tb, stranger, good)

	return []BadCase{
		{Name: "no Authorization", Authorization: "", Challenge: ChallengeMissing},
		{Name: "Basic scheme", Authorization: "Basic Y2xpZW50LWE6c2VjcmV0", Challenge: ChallengeMissing},
		{Name: "empty bearer", Authorization: "Bearer ", Challenge: ChallengeInvalid},
		{Name: "garbage", Authorization: "Bearer not-a-token", Challenge: ChallengeInvalid},
		{Name: "garbage in three parts", Authorization: "Bearer aaaa.bbbb.cccc", Challenge: ChallengeInvalid},
		{Name: "100 KB token", Authorization: "Bearer " + strings.Repeat("A", 100<<10), Challenge: ChallengeInvalid},
		{Name: "alg none", Authorization: "Bearer " + none, Challenge: ChallengeInvalid},
		{Name: "HS256 keyed with the public key", Authorization: "Bearer " + string(hs256), Challenge: ChallengeInvalid},
		{Name: "valid signature, kid not in the JWKS", Authorization: "Bearer " + unknownKid, Challenge: ChallengeInvalid},
		{Name: "tampered payload", Authorization: "Bearer " + tampered, Challenge: ChallengeInvalid},
		{Name: "expired", Authorization: "Bearer " + i.SignClaims(tb, with("exp", now.Add(-2*time.Minute).Unix())), Challenge: ChallengeInvalid},
		{Name: "nbf in the future", Authorization: "Bearer " + i.SignClaims(tb, with("nbf", now.Add(5*time.Minute).Unix())), Challenge: ChallengeInvalid},
		{Name: "iat in the future", Authorization: "Bearer " + i.SignClaims(tb, with("iat", now.Add(5*time.Minute).Unix())), Challenge: ChallengeInvalid},
		{Name: "wrong iss", Authorization: "Bearer " + i.SignClaims(tb, with("iss", "https://evil.example")), Challenge: ChallengeInvalid},
		{Name: "wrong aud", Authorization: "Bearer " + i.SignClaims(tb, with("aud", []string{"another-api"})), Challenge: ChallengeInvalid},
		{Name: "missing exp", Authorization: "Bearer " + i.SignClaims(tb, with("exp", nil)), Challenge: ChallengeInvalid},
		{Name: "missing sub", Authorization: "Bearer " + i.SignClaims(tb, with("sub", nil)), Challenge: ChallengeInvalid},
		{Name: "empty sub", Authorization: "Bearer " + i.SignClaims(tb, with("sub", " ")), Challenge: ChallengeInvalid},
		{Name: "lifetime over the maximum", Authorization: "Bearer " + i.SignClaims(tb, with("exp", now.Add(auth.DefaultMaxTokenLifetime+time.Hour).Unix())), Challenge: ChallengeInvalid},
		{Name: "two Authorization values", Authorization: "Bearer " + valid + ", Bearer " + valid, Challenge: ChallengeInvalid},
	}
}

// SignClaims signs claims as they are (any claim may be missing or wrong)
// with the issuer's current key.
func (i *TestIssuer) SignClaims(tb testing.TB, claims map[string]any) string {
	tb.Helper()
	i.mu.Lock()
	priv := i.priv
	i.mu.Unlock()
	return signClaims(tb, priv, claims)
}

// SignWith signs claims as they are with key, a private JWK the issuer
// may not serve (NewKey makes one).
func SignWith(tb testing.TB, key jwk.Key, claims map[string]any) string {
	tb.Helper()
	return signClaims(tb, key, claims)
}

func signClaims(tb testing.TB, key jwk.Key, claims map[string]any) string {
	tb.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	signed, err := jws.Sign(payload, jws.WithKey(jwa.EdDSA(), key))
	if err != nil {
		tb.Fatal(err)
	}
	return string(signed)
}

func (i *TestIssuer) publicJSON(tb testing.TB) []byte {
	tb.Helper()
	i.mu.Lock()
	pub := i.served[len(i.served)-1]
	i.mu.Unlock()
	b, err := json.Marshal(pub)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func b64(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// PublicKeys returns the public keys the JWKS serves now.
func (i *TestIssuer) PublicKeys() []jwk.Key {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]jwk.Key(nil), i.served...)
}

// SignTyped signs claims as they are with the issuer's current key and
// typ in the protected header ("": no typ).
func (i *TestIssuer) SignTyped(tb testing.TB, claims map[string]any, typ string) string {
	tb.Helper()
	i.mu.Lock()
	priv := i.priv
	i.mu.Unlock()
	payload, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	hdr := jws.NewHeaders()
	if typ != "" {
		if err := hdr.Set(jws.TypeKey, typ); err != nil {
			tb.Fatal(err)
		}
	}
	signed, err := jws.Sign(payload, jws.WithKey(jwa.EdDSA(), priv, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		tb.Fatal(err)
	}
	return string(signed)
}
