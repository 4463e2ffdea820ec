package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// The suite's own issuer (CONTRACTS.md section 8): an Ed25519 key for
// development and single-team deployments; any OpenID Connect provider can
// replace it by pointing AUTH_JWKS_URL at its JWKS.
const (
	// DevIssuer is the iss of the tokens the suite's own issuer signs.
	DevIssuer = "paysuite-dev"
	// KeyFile and JWKSFile are the files keygen writes in its directory:
	// the private signing key (a JWK, mode 0600) and the public JWKS.
	KeyFile  = "signing-key.jwk"
	JWKSFile = "jwks.json"
	// DevDir is where make run and make demo keep the development key,
	// relative to the repository root.
	DevDir = ".cache/auth"
	// AccessTokenType is the typ header of the tokens the suite signs: a
	// JWT access token (RFC 9068), which AUTH_REQUIRED_TYP can demand.
	AccessTokenType = "at+jwt"
)

// GenerateKey writes a new Ed25519 signing key and its public JWKS into
// dir (created when missing) and returns the key id. It refuses to
// overwrite an existing key.
func GenerateKey(dir string) (string, error) {
	return WriteKeyFiles(filepath.Join(dir, KeyFile), filepath.Join(dir, JWKSFile))
}

// WriteKeyFiles writes a new Ed25519 key: the private JWK at keyPath (mode
// 0600) and the public JWKS at jwksPath, creating their directories, and
// returns the key id. It refuses to overwrite a key. The token issuer's
// key and the transfers service's authorization key (pkg/transfersig) are
// both made by it.
func WriteKeyFiles(keyPath, jwksPath string) (string, error) {
	if _, err := os.Stat(keyPath); err == nil {
		return "", fmt.Errorf("%s exists; remove it first to make a new key", keyPath)
	}
	_, raw, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	key, pub, err := Ed25519JWK(raw)
	if err != nil {
		return "", err
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		return "", fmt.Errorf("jwks: %w", err)
	}
	privJSON, err := json.MarshalIndent(key, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode key: %w", err)
	}
	setJSON, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode jwks: %w", err)
	}
	for _, dir := range []string{filepath.Dir(keyPath), filepath.Dir(jwksPath)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("create %s: %w", dir, err)
		}
	}
	if err := os.WriteFile(keyPath, append(privJSON, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("write key: %w", err)
	}
	if err := os.WriteFile(jwksPath, append(setJSON, '\n'), 0o644); err != nil { //nolint:gosec // a public key set
		return "", fmt.Errorf("write jwks: %w", err)
	}
	kid, _ := key.KeyID()
	return kid, nil
}

// Ed25519JWK wraps raw as a private JWK with its thumbprint as kid and alg
// EdDSA, and returns it with its public JWK (use sig).
func Ed25519JWK(raw ed25519.PrivateKey) (priv, pub jwk.Key, err error) {
	priv, err = jwk.Import(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("import key: %w", err)
	}
	if err := jwk.AssignKeyID(priv); err != nil {
		return nil, nil, fmt.Errorf("key id: %w", err)
	}
	if err := priv.Set(jwk.AlgorithmKey, jwa.EdDSA()); err != nil {
		return nil, nil, fmt.Errorf("key alg: %w", err)
	}
	if pub, err = priv.PublicKey(); err != nil {
		return nil, nil, fmt.Errorf("public key: %w", err)
	}
	if err := pub.Set(jwk.KeyUsageKey, jwk.ForSignature); err != nil {
		return nil, nil, fmt.Errorf("key use: %w", err)
	}
	return priv, pub, nil
}

// EnsureKey generates the key of dir when it has none and returns the
// path of its public JWKS and whether a key was made.
func EnsureKey(dir string) (string, bool, error) {
	jwks := filepath.Join(dir, JWKSFile)
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); err == nil {
		if _, err := os.Stat(jwks); err != nil {
			return "", false, fmt.Errorf("%s has a key but no %s: %w", dir, JWKSFile, err)
		}
		return jwks, false, nil
	}
	if _, err := GenerateKey(dir); err != nil {
		return "", false, err
	}
	return jwks, true, nil
}

// SigningKey is a private key that signs tokens.
type SigningKey struct{ key jwk.Key }

// ReadSigningKey reads a private JWK written by GenerateKey.
func ReadSigningKey(path string) (SigningKey, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the operator names the key file
	if err != nil {
		return SigningKey{}, fmt.Errorf("read signing key: %w", err)
	}
	return ParseSigningKey(b)
}

// ParseSigningKey parses a private JWK with a kid.
func ParseSigningKey(b []byte) (SigningKey, error) {
	key, err := jwk.ParseKey(b)
	if err != nil {
		return SigningKey{}, fmt.Errorf("parse signing key: %w", err)
	}
	if _, ok := key.KeyID(); !ok {
		return SigningKey{}, errors.New("signing key has no kid")
	}
	if _, err := key.PublicKey(); err != nil || key.KeyType() == jwa.OctetSeq() {
		return SigningKey{}, errors.New("signing key is not an asymmetric private key")
	}
	return SigningKey{key: key}, nil
}

// NewSigningKey wraps k, a private JWK with a kid (tests make their own).
func NewSigningKey(k jwk.Key) SigningKey { return SigningKey{key: k} }

// Claims are what a token says.
type Claims struct {
	Issuer   string
	Audience string
	Subject  string
	Scopes   []string
	TTL      time.Duration
	// Now is the issue time; time.Now when zero.
	Now time.Time
}

// Sign returns a compact JWS access token for c signed with k, with the
// key's id and typ AccessTokenType in its header.
func (k SigningKey) Sign(c Claims) (string, error) {
	if c.Subject == "" || c.Issuer == "" || c.Audience == "" {
		return "", errors.New("a token needs a subject, an issuer and an audience")
	}
	if c.TTL <= 0 {
		return "", errors.New("a token needs a positive lifetime")
	}
	now := c.Now
	if now.IsZero() {
		now = time.Now()
	}
	tok, err := jwt.NewBuilder().
		Issuer(c.Issuer).
		Audience([]string{c.Audience}).
		Subject(c.Subject).
		IssuedAt(now).
		NotBefore(now).
		Expiration(now.Add(c.TTL)).
		Claim("scope", strings.Join(c.Scopes, " ")).
		Build()
	if err != nil {
		return "", fmt.Errorf("build token: %w", err)
	}
	alg, err := signingAlg(k.key)
	if err != nil {
		return "", err
	}
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.TypeKey, AccessTokenType); err != nil {
		return "", fmt.Errorf("token header: %w", err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(alg, k.key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return string(signed), nil
}

func signingAlg(k jwk.Key) (jwa.SignatureAlgorithm, error) {
	switch k.KeyType() {
	case jwa.OKP():
		return jwa.EdDSA(), nil
	case jwa.EC():
		return jwa.ES256(), nil
	case jwa.RSA():
		return jwa.RS256(), nil
	}
	return jwa.SignatureAlgorithm{}, fmt.Errorf("no signing algorithm for a %s key", k.KeyType())
}

// KeyID returns the key's kid.
func (k SigningKey) KeyID() string {
	kid, _ := k.key.KeyID()
	return kid
}
