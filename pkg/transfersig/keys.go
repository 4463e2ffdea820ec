package transfersig

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/paysuite/payments/pkg/auth"
)

// The files GenerateKey writes: the private key (a JWK, mode 0600), which
// only the transfers service reads (TRANSFERS_AUTHORIZATION_KEY_FILE), and
// the public JWKS, which the ledger reads (LEDGER_AUTHORIZATION_JWKS_FILE).
const (
	KeyFile  = "transfer-authorization-key.jwk"
	JWKSFile = "transfer-authorization-jwks.json"
)

// GenerateKey writes a new Ed25519 key: the private JWK into keyDir and
// the public JWKS into jwksDir (the same directory or another, created
// when missing), and returns its kid. It refuses to overwrite a key.
func GenerateKey(keyDir, jwksDir string) (string, error) {
	return auth.WriteKeyFiles(filepath.Join(keyDir, KeyFile), filepath.Join(jwksDir, JWKSFile))
}

// EnsureKey generates the key of keyDir, its JWKS in jwksDir, when keyDir
// has none; created reports whether it did.
func EnsureKey(keyDir, jwksDir string) (created bool, err error) {
	if _, err := os.Stat(filepath.Join(keyDir, KeyFile)); err == nil {
		if _, err := os.Stat(filepath.Join(jwksDir, JWKSFile)); err != nil {
			return false, fmt.Errorf("%s has a transfer authorization key but %s has no %s: %w", keyDir, jwksDir, JWKSFile, err)
		}
		return false, nil
	}
	if _, err := GenerateKey(keyDir, jwksDir); err != nil {
		return false, err
	}
	return true, nil
}

// NewKey returns a signer with a new random key, named by its thumbprint
// (tests and tools).
func NewKey() (Signer, error) {
	_, raw, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Signer{}, fmt.Errorf("generate key: %w", err)
	}
	priv, _, err := auth.Ed25519JWK(raw)
	if err != nil {
		return Signer{}, err
	}
	kid, _ := priv.KeyID()
	return NewSigner(kid, raw)
}

// ReadSigner reads the private JWK at path (GenerateKey's KeyFile): an
// Ed25519 key with a kid.
func ReadSigner(path string) (Signer, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the operator names the key file
	if err != nil {
		return Signer{}, fmt.Errorf("read transfer authorization key: %w", err)
	}
	key, err := jwk.ParseKey(b)
	if err != nil {
		return Signer{}, fmt.Errorf("parse transfer authorization key %s: %w", path, err)
	}
	kid, _ := key.KeyID()
	var raw ed25519.PrivateKey
	if err := jwk.Export(key, &raw); err != nil {
		return Signer{}, fmt.Errorf("transfer authorization key %s: not an Ed25519 private key: %w", path, err)
	}
	s, err := NewSigner(kid, raw)
	if err != nil {
		return Signer{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ReadVerifier reads the public JWKS at path (GenerateKey's JWKSFile, or
// two such sets merged during a rotation): Ed25519 keys, each with a kid.
// A private key in the set is refused: the ledger must not hold one.
func ReadVerifier(path string) (*Verifier, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the operator names the key file
	if err != nil {
		return nil, fmt.Errorf("read transfer authorization keys: %w", err)
	}
	set, err := jwk.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("parse transfer authorization keys %s: %w", path, err)
	}
	keys := map[string]ed25519.PublicKey{}
	for i := range set.Len() {
		k, _ := set.Key(i)
		kid, _ := k.KeyID()
		if _, dup := keys[kid]; dup {
			return nil, fmt.Errorf("transfer authorization keys %s: kid %q twice", path, kid)
		}
		if _, ok := k.(jwk.OKPPrivateKey); ok {
			return nil, fmt.Errorf("transfer authorization keys %s: key %q is private; give the ledger the public JWKS only", path, kid)
		}
		var raw ed25519.PublicKey
		if err := jwk.Export(k, &raw); err != nil {
			return nil, fmt.Errorf("transfer authorization keys %s: key %q is not an Ed25519 public key: %w", path, kid, err)
		}
		keys[kid] = raw
	}
	v, err := NewVerifier(keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
