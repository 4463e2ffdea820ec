package auth

import (
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// truncation is the precision of the time checks: whole seconds, as the
// claims are written.
const truncation = time.Second

// tokenTimes are a token's time claims; a zero time is an absent claim.
type tokenTimes struct {
	exp, nbf, iat time.Time
}

func timesOf(tok jwt.Token) tokenTimes {
	var t tokenTimes
	t.exp, _ = tok.Expiration()
	t.nbf, _ = tok.NotBefore()
	t.iat, _ = tok.IssuedAt()
	return t
}

// checkTimes applies the time rules to t at now: exp, nbf and iat with
// Leeway, computed as the JWT library computes them (whole seconds), and
// the lifetime: exp - iat at most MaxTokenLifetime, or, without iat, exp -
// now at most MaxTokenLifetime + Leeway. A verified token is checked with
// it again at every cached use, so it stops being accepted at the same
// instant whether it is in the cache or not.
func (v *Verifier) checkTimes(now time.Time, t tokenTimes) error {
	now = now.Truncate(truncation)
	if t.exp.IsZero() {
		return ErrMissingClaim
	}
	exp := t.exp.Truncate(truncation)
	if !now.Before(exp.Add(Leeway)) {
		return ErrExpired
	}
	if !t.nbf.IsZero() && now.Before(t.nbf.Truncate(truncation).Add(-Leeway)) {
		return ErrNotYetValid
	}
	if !t.iat.IsZero() && now.Before(t.iat.Truncate(truncation).Add(-Leeway)) {
		return ErrNotYetValid
	}
	if !t.iat.IsZero() {
		if exp.Sub(t.iat.Truncate(truncation)) > v.cfg.MaxTokenLifetime {
			return ErrLifetime
		}
	} else if exp.Sub(now) > v.cfg.MaxTokenLifetime+Leeway {
		return ErrLifetime
	}
	return nil
}

// checkType refuses a token whose typ header is not RequiredType, when
// one is required. Media types compare without case, and "application/"
// may be left out (RFC 7515 section 4.1.9).
func (v *Verifier) checkType(h jws.Headers) error {
	if v.cfg.RequiredType == "" {
		return nil
	}
	typ, _ := h.Type()
	if !strings.EqualFold(bareMediaType(typ), bareMediaType(v.cfg.RequiredType)) {
		return ErrType
	}
	return nil
}

func bareMediaType(s string) string {
	if len(s) > len("application/") && strings.EqualFold(s[:len("application/")], "application/") {
		return s[len("application/"):]
	}
	return s
}
