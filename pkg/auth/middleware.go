package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// Realm is the realm of every WWW-Authenticate challenge.
const Realm = "paysuite"

// PublicPaths are the only paths served without a token, and only to GET
// (and HEAD): health, metrics and the OpenAPI document.
var PublicPaths = []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"}

// IsPublic reports whether a request with method and path is served
// without a token.
func IsPublic(method, path string) bool {
	return (method == http.MethodGet || method == http.MethodHead) && slices.Contains(PublicPaths, path)
}

// Authenticator is the suite's one authentication middleware: it verifies
// the bearer token of every request but the public ones, rate-limits each
// client, and puts the principal in the request's context, all before any
// handler reads the body. Routes then demand their scope (Mount).
type Authenticator struct {
	verifier *Verifier
	limiter  *Limiter
	// refusals limits the refused requests of each source address.
	refusals   *Limiter
	refusalCfg RefusalLimit
	sources    sourceOf
	log        *slog.Logger
	now        func() time.Time
	refused    *prometheus.CounterVec
}

// refusals are the reasons of auth_requests_refused_total, a bounded set.
var refusals = map[error]string{
	ErrNoToken: "no_token", ErrTokenTooLarge: "too_large", ErrMalformed: "malformed", ErrAlgorithm: "algorithm",
	ErrUnknownKey: "unknown_key", ErrSignature: "signature", ErrExpired: "expired", ErrNotYetValid: "not_yet_valid",
	ErrIssuer: "issuer", ErrAudience: "audience", ErrMissingClaim: "missing_claim", ErrClaims: "claims",
	ErrKeysUnavailable: "keys_unavailable",
}

// New returns the authenticator of cfg, its refusals counted in reg
// (auth_requests_refused_total{reason}) with the token cache's metrics
// (reg nil: not registered). Close stops the JWKS cache it may start, once
// no request is in flight.
func New(ctx context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer, opts ...Option) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "auth_requests_refused_total",
		Help: "Requests refused by authentication (401, 503) or the rate limit (429), by reason."}, []string{"reason"})
	for _, r := range refusals {
		refused.WithLabelValues(r)
	}
	refused.WithLabelValues("rate_limited")
	refused.WithLabelValues("address_rate_limited")
	if reg != nil {
		if err := reg.Register(refused); err != nil {
			return nil, fmt.Errorf("auth: register metrics: %w", err)
		}
	}
	v, err := NewVerifier(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if err := v.Register(reg); err != nil {
		_ = v.Close(ctx)
		return nil, fmt.Errorf("auth: register metrics: %w", err)
	}
	a := &Authenticator{verifier: v, limiter: NewLimiter(cfg.RateRPS, cfg.RateBurst), log: log, now: time.Now, refused: refused}
	for _, o := range opts {
		o(a)
	}
	if a.refusalCfg.isZero() {
		a.refusalCfg = DefaultRefusalLimit
	}
	if err := a.refusalCfg.Validate(); err != nil {
		_ = v.Close(ctx)
		return nil, fmt.Errorf("auth: %w", err)
	}
	proxies, _ := a.refusalCfg.proxies() // Validate parsed them
	a.sources = sourceOf{header: a.refusalCfg.ClientIPHeader, trusted: proxies}
	a.refusals = NewLimiter(a.refusalCfg.RPS, a.refusalCfg.Burst)
	return a, nil
}

// Verifier returns the token verifier.
func (a *Authenticator) Verifier() *Verifier { return a.verifier }

// Close stops the JWKS cache.
func (a *Authenticator) Close(ctx context.Context) error { return a.verifier.Close(ctx) }

// Middleware authenticates and rate-limits every request but the public
// ones: 401 (with a WWW-Authenticate challenge) for a missing or bad
// token, 429 with Retry-After for a client over its rate or for a source
// address over its rate of refused requests (RefusalLimit), 503 when the
// issuer's keys cannot be fetched.
//
// The address's bucket is looked at before the token's signature is
// checked: from an address with no refusal left, only a token verified
// before (answered from the verified-token cache, no signature check) is
// served; any other token is answered 429 at once, so that a flood of
// forged tokens costs no signature check. A refusal takes one request of
// the bucket once the token has failed.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsPublic(r.Method, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		src := a.sources.source(r)
		raw, err := bearer(r)
		var p Principal
		if err == nil {
			cached := false
			if over, wait := a.refusals.Exhausted(src, a.now()); over {
				if p, cached = a.verifier.Cached(raw); !cached {
					a.tooMany(w, r, "address_rate_limited", wait, "too many requests refused from this address")
					return
				}
			}
			if !cached {
				p, err = a.verifier.Verify(r.Context(), raw)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrKeysUnavailable) { // the issuer's fault, not the caller's
				if ok, wait := a.refusals.Allow(src, a.now()); !ok {
					a.tooMany(w, r, "address_rate_limited", wait, "too many requests refused from this address")
					return
				}
			}
			a.reject(w, r, err)
			return
		}
		if ok, wait := a.limiter.Allow(p.Subject, a.now()); !ok {
			a.tooMany(w, r, "rate_limited", wait, "client over its rate limit")
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// tooMany answers 429 with Retry-After, counting reason.
func (a *Authenticator) tooMany(w http.ResponseWriter, r *http.Request, reason string, wait time.Duration, why string) {
	a.refused.WithLabelValues(reason).Inc()
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	httpapi.WriteError(w, r, a.log, errkind.Errorf(errkind.RateLimited, "%s; retry after the Retry-After seconds", why))
}

// bearer reads the bearer token of r, refusing a missing, doubled or
// oversized Authorization header before anything is verified.
func bearer(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return "", ErrNoToken
	}
	if len(values) > 1 {
		return "", ErrMalformed
	}
	h := values[0]
	if len(h) > MaxTokenBytes+len("Bearer ") {
		return "", ErrTokenTooLarge
	}
	scheme, token, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrNoToken // another scheme (Basic...): no bearer token at all
	}
	return strings.TrimSpace(token), nil
}

func (a *Authenticator) reject(w http.ResponseWriter, r *http.Request, err error) {
	reason := "malformed"
	for e, label := range refusals {
		if errors.Is(err, e) {
			reason = label
			break
		}
	}
	a.refused.WithLabelValues(reason).Inc()
	if errors.Is(err, ErrKeysUnavailable) {
		httpapi.WriteError(w, r, a.log, errkind.Errorf(errkind.Unavailable, "%v; try again later", err))
		return
	}
	challenge := `Bearer realm="` + Realm + `"`
	detail := "a bearer token is required (Authorization: Bearer <token>)"
	if !errors.Is(err, ErrNoToken) {
		challenge += `, error="invalid_token"`
		detail = "invalid token: " + err.Error()
	}
	a.log.DebugContext(r.Context(), "request not authenticated", "reason", err.Error())
	w.Header().Set("WWW-Authenticate", challenge)
	httpapi.WriteError(w, r, a.log, errkind.Errorf(errkind.Unauthorized, "%s", detail))
}
