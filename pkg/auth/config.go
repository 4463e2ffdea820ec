package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Verification limits of CONTRACTS.md section 8.
const (
	// DefaultAudience is the audience a token must name when AUTH_AUDIENCE
	// is not set.
	DefaultAudience = "paysuite"
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway = 60 * time.Second
	// RefreshInterval is the shortest time between two JWKS fetches caused
	// by tokens naming a key id the cached set does not have: a flood of
	// made-up kids costs the identity provider one request per interval.
	RefreshInterval = 30 * time.Second
	// MaxTokenBytes caps the token a request may carry; a longer one is
	// refused before any parsing. Real access tokens are a few KB.
	MaxTokenBytes = 16 << 10
	// jwksRefreshEvery is the periodic refresh of a JWKS fetched by URL,
	// so that a retired key stops being accepted without a restart.
	jwksRefreshEvery = time.Hour
	// startFetchTimeout bounds the first JWKS fetch at start.
	startFetchTimeout = 10 * time.Second
)

// Config says where the keys come from and what a token must say. It is
// read once at start (pkg/platform: AUTH_JWKS_URL, with AUTH_JWKS_CA_FILE
// and DEV_INSECURE_HTTP, or AUTH_JWKS_FILE,
// AUTH_ISSUER, AUTH_AUDIENCE, RATE_LIMIT_RPS, RATE_LIMIT_BURST, and the
// token rules and cache, AUTH_MAX_TOKEN_LIFETIME, AUTH_REQUIRED_TYP,
// AUTH_TOKEN_CACHE_SIZE).
type Config struct {
	// JWKSURL is an https URL serving the JWKS of the token issuer
	// (http only with InsecureHTTP).
	JWKSURL string `env:"AUTH_JWKS_URL" help:"the token issuer's JWKS URL, https:// (this or AUTH_JWKS_FILE is required)"`
	// JWKSCAFile, when set, holds PEM certificates trusted for JWKSURL's
	// TLS besides the system's (an identity provider behind a private CA).
	JWKSCAFile string `env:"AUTH_JWKS_CA_FILE" help:"PEM CA certificates trusted for AUTH_JWKS_URL besides the system's (a private CA)"`
	// InsecureHTTP accepts http:// for JWKSURL (and for the console's
	// upstreams and the transfers service's TRANSFERS_LEDGER_URL, which
	// carry operator tokens): a development switch. Over plain HTTP anyone on the
	// path can swap the key set that decides who may move money, or read
	// the operator tokens the console sends; the development overlay, the
	// compose demo and payments-dev set it, never the base or production
	// manifests, and a service that runs with it says so at start.
	InsecureHTTP bool `env:"DEV_INSECURE_HTTP" help:"development only: accept http:// for AUTH_JWKS_URL, the console's upstreams and TRANSFERS_LEDGER_URL (keys and tokens in clear); never in production"`
	// JWKSFile is a file holding the JWKS; exactly one of JWKSURL and
	// JWKSFile is set.
	JWKSFile string `env:"AUTH_JWKS_FILE" help:"a JWKS file instead of AUTH_JWKS_URL"`
	// Issuer is the iss every token must carry.
	Issuer string `env:"AUTH_ISSUER" help:"the iss every token must carry (required)"`
	// Audience must be one of a token's aud values; DefaultAudience when
	// empty.
	Audience string `env:"AUTH_AUDIENCE" help:"a value the token's aud must contain"`
	// RateRPS and RateBurst bound the requests of one client to one
	// instance (a token bucket per subject).
	RateRPS   float64 `env:"RATE_LIMIT_RPS" help:"requests per second per client and instance"`
	RateBurst int     `env:"RATE_LIMIT_BURST" help:"burst per client and instance"`
	// MaxTokenLifetime is the longest lifetime a token may claim: exp -
	// iat, or exp - now (with Leeway) for a token without iat. Zero means
	// DefaultMaxTokenLifetime.
	MaxTokenLifetime time.Duration `env:"AUTH_MAX_TOKEN_LIFETIME" help:"longest token lifetime accepted (exp - iat, or exp - now without iat)"`
	// RequiredType, when set, is the typ header every token must carry
	// (at+jwt for RFC 9068 access tokens; compared without case and without
	// an application/ prefix). Empty accepts any typ, as most providers
	// send JWT.
	RequiredType string `env:"AUTH_REQUIRED_TYP" help:"typ header every token must carry (at+jwt per RFC 9068); empty: any"`
	// TokenCacheSize is how many verified tokens are remembered, so that a
	// client's next requests with the same token skip the signature check;
	// 0 turns the cache off.
	TokenCacheSize int `env:"AUTH_TOKEN_CACHE_SIZE" help:"verified tokens remembered per instance (0: off)"`
}

// Default rate limits per client and instance, and defaults of the token
// rules.
const (
	DefaultRateRPS   = 50
	DefaultRateBurst = 100
	// DefaultMaxTokenLifetime is the longest token lifetime accepted when
	// AUTH_MAX_TOKEN_LIFETIME is not set.
	DefaultMaxTokenLifetime = 24 * time.Hour
	// DefaultTokenCacheSize is how many verified tokens are remembered when
	// AUTH_TOKEN_CACHE_SIZE is not set.
	DefaultTokenCacheSize = 10_000
)

// DefaultConfig is the configuration before the environment is read: the
// one declaration of the AUTH_* and RATE_LIMIT_* defaults.
func DefaultConfig() Config {
	return Config{Audience: DefaultAudience, RateRPS: DefaultRateRPS, RateBurst: DefaultRateBurst,
		MaxTokenLifetime: DefaultMaxTokenLifetime, TokenCacheSize: DefaultTokenCacheSize}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.JWKSURL == "" && c.JWKSFile == "":
		errs = append(errs, errors.New("AUTH_JWKS_URL or AUTH_JWKS_FILE is required: every request is authenticated"))
	case c.JWKSURL != "" && c.JWKSFile != "":
		errs = append(errs, errors.New("set AUTH_JWKS_URL or AUTH_JWKS_FILE, not both"))
	case c.JWKSURL != "":
		if err := CheckURL("AUTH_JWKS_URL", c.JWKSURL, c.InsecureHTTP); err != nil {
			errs = append(errs, err)
		}
	}
	if c.JWKSCAFile != "" && c.JWKSURL == "" {
		errs = append(errs, errors.New("AUTH_JWKS_CA_FILE is for AUTH_JWKS_URL, which is not set"))
	}
	if c.Issuer == "" {
		errs = append(errs, errors.New("AUTH_ISSUER is required"))
	}
	if !(c.RateRPS > 0) { // NaN too
		errs = append(errs, fmt.Errorf("RATE_LIMIT_RPS must be positive, got %v", c.RateRPS))
	}
	if c.RateBurst < 1 {
		errs = append(errs, fmt.Errorf("RATE_LIMIT_BURST must be at least 1, got %d", c.RateBurst))
	}
	if c.MaxTokenLifetime < 0 {
		errs = append(errs, fmt.Errorf("AUTH_MAX_TOKEN_LIFETIME must be positive, got %v", c.MaxTokenLifetime))
	}
	if c.TokenCacheSize < 0 {
		errs = append(errs, fmt.Errorf("AUTH_TOKEN_CACHE_SIZE must be 0 (off) or more, got %d", c.TokenCacheSize))
	}
	return errors.Join(errs...)
}

// CheckURL checks the value of the variable name: an https:// URL with a
// host; an http:// one only to a loopback host (localhost, 127.0.0.0/8,
// ::1: what is sent there never leaves the machine or the pod), or
// anywhere when insecureHTTP (DEV_INSECURE_HTTP) allows it.
func CheckURL(name, raw string, insecureHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", name, raw)
	}
	if u.Scheme == "http" && !insecureHTTP && !loopback(u.Hostname()) {
		return fmt.Errorf("%s: %q is plain http: it must be https:// (DEV_INSECURE_HTTP=true accepts http:// in development only)", name, raw)
	}
	return nil
}

// loopback reports whether host names this machine's loopback interface.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
