package auth

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Reasons a token is refused. Each is an *Invalid wrapping one of them;
// the middleware answers 401 with the reason as the problem's detail.
var (
	ErrNoToken         = errors.New("no bearer token")
	ErrTokenTooLarge   = errors.New("token too large")
	ErrMalformed       = errors.New("malformed token")
	ErrAlgorithm       = errors.New("signing algorithm not accepted")
	ErrUnknownKey      = errors.New("token signed by an unknown key")
	ErrSignature       = errors.New("signature not verified")
	ErrExpired         = errors.New("token expired")
	ErrNotYetValid     = errors.New("token not yet valid")
	ErrIssuer          = errors.New("wrong issuer")
	ErrAudience        = errors.New("wrong audience")
	ErrMissingClaim    = errors.New("a required claim (exp, sub) is missing")
	ErrClaims          = errors.New("invalid claims")
	ErrKeysUnavailable = errors.New("the key set of the token issuer cannot be fetched")
	// ErrLifetime and ErrType are invalid claims (counted as such): a
	// lifetime over AUTH_MAX_TOKEN_LIFETIME, a typ other than
	// AUTH_REQUIRED_TYP.
	ErrLifetime = fmt.Errorf("%w: token lifetime over the accepted maximum", ErrClaims)
	ErrType     = fmt.Errorf("%w: token type (typ) not accepted", ErrClaims)
)

// allowed are the signing algorithms accepted (never none, never HMAC).
var allowed = []jwa.SignatureAlgorithm{jwa.EdDSA(), jwa.ES256(), jwa.RS256()}

// Verifier checks bearer tokens against a JWKS: signature, iss, aud, exp,
// nbf, iat, the lifetime and (when required) typ. It remembers the tokens
// it verified (tokens) until they expire or the key set changes. It is
// safe for concurrent use.
type Verifier struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	every time.Duration // least time between two kid-miss refreshes

	static jwk.Set                       // AUTH_JWKS_FILE
	cache  *jwk.Cache                    // AUTH_JWKS_URL
	res    *httprc.ResourceBase[jwk.Set] // its one resource: the set in use now
	tokens *tokenCache                   // nil when AUTH_TOKEN_CACHE_SIZE is 0

	mu          sync.Mutex // serialises kid-miss refreshes
	lastRefresh time.Time
}

// NewVerifier loads the key set of cfg: read once from JWKSFile, or
// fetched from JWKSURL and cached (refreshed hourly, and at most once per
// RefreshInterval when a token names an unknown key id). A JWKS URL that
// does not answer at start is not fatal: the first tokens then trigger the
// fetch. The cache's goroutines run until Close, not until ctx ends: a
// service's context is cancelled before its HTTP server has drained, and
// the requests still in flight must still find their keys (httprc answers
// a lookup on a stopped cache with nothing, which jwk.Cache does not
// expect).
func NewVerifier(ctx context.Context, cfg Config, log *slog.Logger) (*Verifier, error) {
	if cfg.Audience == "" {
		cfg.Audience = DefaultAudience
	}
	if cfg.MaxTokenLifetime == 0 {
		cfg.MaxTokenLifetime = DefaultMaxTokenLifetime
	}
	v := &Verifier{cfg: cfg, log: log, now: time.Now, every: RefreshInterval, tokens: newTokenCache(cfg.TokenCacheSize)}
	if cfg.JWKSFile != "" {
		set, err := jwk.ReadFile(cfg.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("AUTH_JWKS_FILE %s: %w", cfg.JWKSFile, err)
		}
		if err := usable(set); err != nil {
			return nil, fmt.Errorf("AUTH_JWKS_FILE %s: %w", cfg.JWKSFile, err)
		}
		v.static = set
		return v, nil
	}
	if cfg.JWKSURL == "" {
		return nil, errors.New("auth: no JWKS configured")
	}
	if err := CheckURL("AUTH_JWKS_URL", cfg.JWKSURL, cfg.InsecureHTTP); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	client, err := jwksClient(cfg)
	if err != nil {
		return nil, err
	}
	if u, _ := url.Parse(cfg.JWKSURL); u.Scheme == "http" && !loopback(u.Hostname()) {
		log.WarnContext(ctx, "DEV_INSECURE_HTTP: the JWKS is fetched over plain http; development only", "jwks_url", cfg.JWKSURL)
	}
	cache, err := jwk.NewCache(context.WithoutCancel(ctx), httprc.NewClient())
	if err != nil {
		return nil, fmt.Errorf("auth: start JWKS cache: %w", err)
	}
	v.cache = cache
	fctx, cancel := context.WithTimeout(ctx, startFetchTimeout)
	defer cancel()
	err = cache.Register(fctx, cfg.JWKSURL, jwk.WithMaxFetchBodySize(1<<20),
		jwk.WithHTTPClient(client),
		jwk.WithHttprcResourceOption(httprc.WithMaxInterval(jwksRefreshEvery)))
	if err != nil {
		if !cache.IsRegistered(ctx, cfg.JWKSURL) {
			_ = cache.Shutdown(ctx)
			return nil, fmt.Errorf("auth: register JWKS %s: %w", cfg.JWKSURL, err)
		}
		log.WarnContext(ctx, "JWKS not fetched at start; tokens will trigger the fetch", "jwks_url", cfg.JWKSURL, "err", err)
	}
	if v.res, err = cache.LookupResource(ctx, cfg.JWKSURL); err != nil {
		_ = cache.Shutdown(ctx)
		return nil, fmt.Errorf("auth: JWKS %s: %w", cfg.JWKSURL, err)
	}
	return v, nil
}

// jwksClient is the HTTP client of the JWKS fetches: TLS 1.2 at least,
// the system's roots plus AUTH_JWKS_CA_FILE's, and no redirect to a plain
// http URL unless DEV_INSECURE_HTTP.
func jwksClient(cfg Config) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.JWKSCAFile != "" {
		pem, err := os.ReadFile(cfg.JWKSCAFile)
		if err != nil {
			return nil, fmt.Errorf("auth: AUTH_JWKS_CA_FILE: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("auth: AUTH_JWKS_CA_FILE %s holds no PEM certificate", cfg.JWKSCAFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Timeout: startFetchTimeout, Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("too many redirects")
			}
			if req.URL.Scheme != "https" && !cfg.InsecureHTTP && !loopback(req.URL.Hostname()) {
				return fmt.Errorf("JWKS redirected to %s, not https", req.URL.Redacted())
			}
			return nil
		}}, nil
}

// keySet returns the key set tokens are verified with now; nil before the
// first fetch of a JWKS URL.
func (v *Verifier) keySet() jwk.Set {
	if v.static != nil {
		return v.static
	}
	return v.res.Resource()
}

// Verify checks raw, a compact JWS, and returns its principal. Errors wrap
// one of the Err* reasons above. A token verified before under the same
// key set, and still within its exp, nbf, iat and lifetime rules now, is
// answered from the cache without checking its signature again; anything
// else is verified in full, and only a token that passes is remembered.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if raw == "" {
		return Principal{}, ErrMalformed
	}
	if len(raw) > MaxTokenBytes {
		return Principal{}, ErrTokenTooLarge
	}
	if !compactJWS(raw) {
		return Principal{}, ErrMalformed
	}
	set := v.keySet()
	if v.tokens == nil || set == nil {
		p, _, err := v.verify(ctx, raw)
		return p, err
	}
	gen := v.tokens.generation(set)
	key := sha256.Sum256([]byte(raw))
	if p, ok := v.tokens.get(key, gen, func(t tokenTimes) bool { return v.checkTimes(v.now(), t) == nil }); ok {
		return p, nil
	}
	p, times, err := v.verify(ctx, raw)
	if err != nil {
		return Principal{}, err
	}
	// A key set refetched meanwhile may lack the key that verified raw:
	// only an entry of the generation seen before verification is added.
	if cur := v.keySet(); cur != nil && v.tokens.generation(cur) == gen {
		v.tokens.add(key, gen, p, times)
	}
	return p, nil
}

// Cached returns the principal of raw when raw is a token verified before
// under the key set in use and still within its time rules: the cache's
// answer alone, with no signature check and nothing fetched. False for
// any other token, and always when the cache is off.
func (v *Verifier) Cached(raw string) (Principal, bool) {
	if v.tokens == nil || raw == "" || len(raw) > MaxTokenBytes || !compactJWS(raw) {
		return Principal{}, false
	}
	set := v.keySet()
	if set == nil {
		return Principal{}, false
	}
	return v.tokens.peek(sha256.Sum256([]byte(raw)), v.tokens.generation(set),
		func(t tokenTimes) bool { return v.checkTimes(v.now(), t) == nil })
}

// verify checks raw in full: its signature against the key set, then its
// claims.
func (v *Verifier) verify(ctx context.Context, raw string) (Principal, tokenTimes, error) {

	var keyErr error
	provider := jws.KeyProviderFunc(func(ctx context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
		if err := v.checkType(sig.ProtectedHeaders()); err != nil {
			keyErr = err
			return err
		}
		alg, key, err := v.keyFor(ctx, sig.ProtectedHeaders())
		if err != nil {
			keyErr = err
			return err
		}
		sink.Key(alg, key)
		return nil
	})
	tok, err := jwt.ParseString(raw,
		jwt.WithKeyProvider(provider),
		jwt.WithValidate(true),
		jwt.WithIssuer(v.cfg.Issuer),
		jwt.WithAudience(v.cfg.Audience),
		jwt.WithAcceptableSkew(Leeway),
		jwt.WithTruncation(truncation),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithRequiredClaim(jwt.SubjectKey),
		jwt.WithClock(jwt.ClockFunc(v.now)),
		jwt.WithContext(ctx),
	)
	if err != nil {
		return Principal{}, tokenTimes{}, classify(err, keyErr)
	}
	sub, _ := tok.Subject()
	if strings.TrimSpace(sub) == "" {
		return Principal{}, tokenTimes{}, ErrMissingClaim
	}
	scopes, err := scopesOf(tok)
	if err != nil {
		return Principal{}, tokenTimes{}, err
	}
	times := timesOf(tok)
	if err := v.checkTimes(v.now(), times); err != nil {
		return Principal{}, tokenTimes{}, err
	}
	return Principal{Subject: sub, Scopes: slices.Clip(scopes)}, times, nil
}

// compactJWS reports whether s has the shape of a compact JWS: three
// base64url parts. Anything else (JSON serialization, JWE) is refused
// before the library sees it.
func compactJWS(s string) bool {
	if strings.Count(s, ".") != 2 {
		return false
	}
	for i := range len(s) {
		if !base64url(s[i]) && s[i] != '.' {
			return false
		}
	}
	return true
}

func base64url(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func classify(err, keyErr error) error {
	if keyErr != nil {
		return keyErr
	}
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return ErrExpired
	case errors.Is(err, jwt.TokenNotYetValidError()), errors.Is(err, jwt.InvalidIssuedAtError()):
		return ErrNotYetValid
	case errors.Is(err, jwt.InvalidIssuerError()):
		return ErrIssuer
	case errors.Is(err, jwt.InvalidAudienceError()):
		return ErrAudience
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return ErrMissingClaim
	case errors.Is(err, jwt.ValidateError()):
		return ErrClaims
	}
	if errors.Is(err, jws.ParseError()) {
		return ErrMalformed
	}
	if errors.Is(err, jws.VerifyError()) || errors.Is(err, jws.VerificationError()) {
		return ErrSignature
	}
	return ErrMalformed
}

// scopesOf reads the scope claim: a space-separated string (RFC 9068), or
// a list of strings as some providers send; without one, scp, where Entra
// ID and Okta put the scopes.
func scopesOf(tok jwt.Token) ([]string, error) {
	claim := "scope"
	if !tok.Has(claim) {
		claim = "scp"
	}
	if !tok.Has(claim) {
		return nil, nil
	}
	var raw any
	if err := tok.Get(claim, &raw); err != nil {
		return nil, ErrClaims
	}
	switch s := raw.(type) {
	case string:
		return strings.Fields(s), nil
	case []any:
		out := make([]string, 0, len(s))
		for _, e := range s {
			str, ok := e.(string)
			if !ok {
				return nil, ErrClaims
			}
			out = append(out, strings.Fields(str)...)
		}
		return out, nil
	}
	return nil, ErrClaims
}

// Close stops the JWKS cache, if any.
func (v *Verifier) Close(ctx context.Context) error {
	if v.cache == nil {
		return nil
	}
	if err := v.cache.Shutdown(ctx); err != nil {
		return fmt.Errorf("auth: stop JWKS cache: %w", err)
	}
	return nil
}
