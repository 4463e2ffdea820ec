package transfersig

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
)

// DeriveKey returns a 32-byte secret key for purpose, derived from the
// signer's private key with HKDF-SHA-256 (RFC 5869; purpose is the info):
// a key of the transfers service for another use (the listing's cursors)
// that needs no configuration of its own, is the same on every instance
// that holds the signing key, and says nothing about the signing key.
func (s Signer) DeriveKey(purpose string) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, s.key.Seed(), nil, purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the %s key: %w", purpose, err)
	}
	return k, nil
}
