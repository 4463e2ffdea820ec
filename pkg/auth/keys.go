package auth

import (
	"context"
	"errors"
	"slices"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// usable reports an error when set has no key a token could be verified
// with.
func usable(set jwk.Set) error {
	for i := range set.Len() {
		k, _ := set.Key(i)
		if _, ok := k.KeyID(); ok && k.KeyType() != jwa.OctetSeq() {
			return nil
		}
	}
	return errors.New("the JWKS has no public key with a kid")
}

// keyFor returns the key of the JWKS that h names, with the algorithm to
// verify it with, after checking the algorithm is one of the allowed ones
// and matches the key's type (and the key's own alg, when it has one).
func (v *Verifier) keyFor(ctx context.Context, h jws.Headers) (jwa.SignatureAlgorithm, jwk.Key, error) {
	alg, ok := h.Algorithm()
	if !ok || !slices.Contains(allowed, alg) {
		return alg, nil, ErrAlgorithm
	}
	kid, ok := h.KeyID()
	if !ok || kid == "" {
		return alg, nil, ErrUnknownKey
	}
	key, err := v.lookup(ctx, kid)
	if err != nil {
		return alg, nil, err
	}
	if ka, ok := key.Algorithm(); ok && ka.String() != alg.String() {
		return alg, nil, ErrAlgorithm
	}
	want := map[string]jwa.KeyType{
		jwa.EdDSA().String(): jwa.OKP(),
		jwa.ES256().String(): jwa.EC(),
		jwa.RS256().String(): jwa.RSA(),
	}[alg.String()]
	if key.KeyType() != want {
		return alg, nil, ErrAlgorithm
	}
	return alg, key, nil
}

// lookup finds kid in the key set. With a JWKS URL, a kid the cached set
// does not have refetches the set, at most once per v.every.
func (v *Verifier) lookup(ctx context.Context, kid string) (jwk.Key, error) {
	if v.static != nil {
		if k, ok := v.static.LookupKeyID(kid); ok {
			return k, nil
		}
		return nil, ErrUnknownKey
	}
	set, err := v.cache.Lookup(ctx, v.cfg.JWKSURL)
	if err == nil {
		if k, ok := set.LookupKeyID(kid); ok {
			return k, nil
		}
	}
	fetched := err == nil
	v.mu.Lock()
	defer v.mu.Unlock()
	// Another request may have refreshed while this one waited.
	if s, err := v.cache.Lookup(ctx, v.cfg.JWKSURL); err == nil {
		fetched = true
		if k, ok := s.LookupKeyID(kid); ok {
			return k, nil
		}
	}
	now := v.now()
	if !v.lastRefresh.IsZero() && now.Sub(v.lastRefresh) < v.every {
		if !fetched {
			return nil, ErrKeysUnavailable
		}
		return nil, ErrUnknownKey
	}
	v.lastRefresh = now
	set, err = v.cache.Refresh(ctx, v.cfg.JWKSURL)
	if err != nil {
		v.log.WarnContext(ctx, "JWKS refresh failed", "jwks_url", v.cfg.JWKSURL, "err", err)
		if !fetched {
			return nil, ErrKeysUnavailable
		}
		return nil, ErrUnknownKey
	}
	v.log.InfoContext(ctx, "JWKS refreshed for an unknown key id", "jwks_url", v.cfg.JWKSURL, "keys", set.Len())
	if k, ok := set.LookupKeyID(kid); ok {
		return k, nil
	}
	return nil, ErrUnknownKey
}
