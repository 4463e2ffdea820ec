package ui

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDC configures sign-in by OpenID Connect: the authorization code flow
// with PKCE (S256), state and nonce. The flow is go-oidc's and
// golang.org/x/oauth2's; what the console adds is keeping state, nonce
// and verifier in a signed, short-lived cookie (nothing on the server
// until the sign-in completes), and holding the access token to the same
// check as a pasted one.
type OIDC struct {
	// Issuer is the provider's issuer URL (discovery); empty: no OIDC.
	Issuer string
	// ClientID and ClientSecret are the console's client.
	ClientID, ClientSecret string
	// RedirectURL is the console's /oidc/callback as the provider knows it.
	RedirectURL string
	// Scopes are asked for; openid among them.
	Scopes []string
	// Name is the provider's name on the sign-in page.
	Name string
	// HTTPClient talks to the provider; one with a 10 s timeout when nil.
	HTTPClient *http.Client
}

// oidcTimeout bounds every request to the provider.
const oidcTimeout = 10 * time.Second

// oidcFlow is the provider, discovered on first use and then kept: a
// provider down when the console starts does not stop it, and the first
// sign-in after it is back finds it.
type oidcFlow struct {
	cfg  OIDC
	http *http.Client

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func newOIDCFlow(cfg OIDC) *oidcFlow {
	c := cfg.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: oidcTimeout}
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Issuer
	}
	return &oidcFlow{cfg: cfg, http: c}
}

// ctx carries the flow's HTTP client to go-oidc and oauth2.
func (f *oidcFlow) ctx(ctx context.Context) context.Context { return oidc.ClientContext(ctx, f.http) }

// client returns the OAuth 2 configuration and the ID token verifier,
// reading the provider's discovery document the first time.
func (f *oidcFlow) client(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.oauth != nil {
		return f.oauth, f.verifier, nil
	}
	ctx, cancel := context.WithTimeout(ctx, oidcTimeout)
	defer cancel()
	p, err := oidc.NewProvider(f.ctx(ctx), f.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("discover %s: %w", f.cfg.Issuer, err)
	}
	var meta struct {
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, nil, fmt.Errorf("discover %s: %w", f.cfg.Issuer, err)
	}
	endpoint := p.Endpoint()
	// client_secret_basic is the default of the discovery document;
	// naming the style spares a refused exchange its second try in the
	// other style (oauth2's auto-detection), which a spent code would
	// fail anyway.
	endpoint.AuthStyle = oauth2.AuthStyleInHeader
	if len(meta.AuthMethods) > 0 && !slices.Contains(meta.AuthMethods, "client_secret_basic") &&
		slices.Contains(meta.AuthMethods, "client_secret_post") {
		endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	f.oauth = &oauth2.Config{ClientID: f.cfg.ClientID, ClientSecret: f.cfg.ClientSecret, Endpoint: endpoint,
		RedirectURL: f.cfg.RedirectURL, Scopes: f.cfg.Scopes}
	f.verifier = p.Verifier(&oidc.Config{ClientID: f.cfg.ClientID})
	return f.oauth, f.verifier, nil
}

// DiscoverOIDC reads the provider's discovery document now, so that a
// wrong issuer shows in the logs at start rather than at the first
// sign-in. A failure is logged, not fatal: the next sign-in tries again.
func (s *Server) DiscoverOIDC(ctx context.Context) {
	if s.oidc == nil {
		return
	}
	if _, _, err := s.oidc.client(ctx); err != nil {
		s.log.WarnContext(ctx, "OpenID provider not discovered at start; sign-ins will try again", "oidc_issuer", s.oidc.cfg.Issuer, "err", err)
	}
}

// oidcLogin starts a sign-in: state, nonce and PKCE verifier go in the
// signed login cookie, and the browser goes to the provider.
func (s *Server) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if s.sessions.get(r).signedIn() {
		http.Redirect(w, r, "/find", http.StatusSeeOther)
		return
	}
	conf, _, err := s.oidc.client(r.Context())
	if err != nil {
		s.oidcRefused(w, r, http.StatusBadGateway, "provider_unreachable", err, "Sign-in unavailable",
			s.oidc.cfg.Name+" cannot be reached now: try again later, or sign in with a token.")
		return
	}
	l := pendingLogin{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier()}
	s.sessions.startLogin(w, l)
	http.Redirect(w, r, conf.AuthCodeURL(l.State, oidc.Nonce(l.Nonce), oauth2.S256ChallengeOption(l.Verifier)), http.StatusFound)
}

// oidcCallback finishes a sign-in. The provider's answer must belong to
// the sign-in this browser started (state, spent here), the code is
// exchanged with the PKCE verifier, the ID token must be the provider's,
// for this client, unexpired and carry this sign-in's nonce; then the
// access token must pass pkg/auth and grant operacoes, as a pasted token
// must. Only then is a session made, under a new id.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := s.oidc.cfg.Name
	l := s.sessions.takeLogin(w, r)
	q := r.URL.Query()
	switch {
	case l == nil:
		s.oidcRefused(w, r, http.StatusBadRequest, "state_unknown", nil, "Sign-in expired",
			"This sign-in is unknown, expired or already finished: start again from the sign-in page.")
		return
	case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(l.State)) != 1:
		s.oidcRefused(w, r, http.StatusBadRequest, "state_mismatch", nil, "Sign-in refused",
			"The answer from "+name+" does not belong to this sign-in (state mismatch): start again from the sign-in page.")
		return
	case q.Get("error") != "":
		s.oidcRefused(w, r, http.StatusForbidden, "provider_error", errors.New(providerError(q.Get("error"))), "Sign-in refused",
			name+" refused the sign-in ("+providerError(q.Get("error"))+"): nobody is signed in.")
		return
	case q.Get("code") == "":
		s.oidcRefused(w, r, http.StatusBadRequest, "no_code", nil, "Sign-in refused",
			"The answer from "+name+" carries no authorization code: start again from the sign-in page.")
		return
	}
	conf, idVerifier, err := s.oidc.client(ctx)
	if err != nil {
		s.oidcRefused(w, r, http.StatusBadGateway, "provider_unreachable", err, "Sign-in unavailable",
			name+" cannot be reached now: try again later, or sign in with a token.")
		return
	}
	tok, err := conf.Exchange(s.oidc.ctx(ctx), q.Get("code"), oauth2.VerifierOption(l.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			s.oidcRefused(w, r, http.StatusUnauthorized, "code_refused", errors.New(providerError(re.ErrorCode)), "Sign-in refused",
				name+" refused to exchange the sign-in code ("+providerError(re.ErrorCode)+"): start again from the sign-in page.")
			return
		}
		if re != nil && re.Response != nil {
			err = fmt.Errorf("token endpoint answered %d", re.Response.StatusCode) // its body is the provider's, not logged
		}
		s.oidcRefused(w, r, http.StatusBadGateway, "provider_unreachable", err, "Sign-in unavailable",
			name+" did not answer the code exchange: try again later, or sign in with a token.")
		return
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		s.oidcRefused(w, r, http.StatusBadGateway, "no_id_token", nil, "Sign-in refused",
			name+" answered without an ID token: is openid among CONSOLE_OIDC_SCOPES?")
		return
	}
	id, err := idVerifier.Verify(s.oidc.ctx(ctx), rawID)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			s.oidcRefused(w, r, http.StatusUnauthorized, "id_token_expired", err, "Sign-in refused",
				"The ID token from "+name+" has expired: check the clocks, then start again from the sign-in page.")
			return
		}
		s.oidcRefused(w, r, http.StatusUnauthorized, "id_token_invalid", err, "Sign-in refused",
			"The ID token from "+name+" was refused (issuer, audience or signature): nobody is signed in.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(id.Nonce), []byte(l.Nonce)) != 1 {
		s.oidcRefused(w, r, http.StatusUnauthorized, "nonce_mismatch", nil, "Sign-in refused",
			"The ID token from "+name+" was not issued for this sign-in (nonce mismatch): start again from the sign-in page.")
		return
	}
	if id.AccessTokenHash != "" {
		if err := id.VerifyAccessToken(tok.AccessToken); err != nil {
			s.oidcRefused(w, r, http.StatusUnauthorized, "at_hash_mismatch", err, "Sign-in refused",
				"The access token from "+name+" does not match its ID token: nobody is signed in.")
			return
		}
	}
	p, err := s.verifier.Verify(ctx, tok.AccessToken)
	if err != nil {
		s.oidcRefused(w, r, http.StatusUnauthorized, "access_token_refused", err, "Sign-in refused",
			"The access token from "+name+" was refused ("+err.Error()+"): the services accept only tokens of "+
				"the issuer, audience and keys set in AUTH_*.")
		return
	}
	if !p.Operator() {
		s.oidcRefused(w, r, http.StatusForbidden, "no_operacoes", nil, "Sign-in refused",
			"The access token from "+name+" does not grant the operacoes scope: ask for it (CONSOLE_OIDC_SCOPES) or have it granted.")
		return
	}
	// A new session id at sign-in, as for a pasted token; the state is
	// spent, so that the same answer signs nobody in again.
	s.sessions.markSignedIn(l.State)
	if old := s.sessions.get(r); old != nil {
		s.sessions.destroy(w, old)
	}
	sess := s.sessions.create(w, tok.AccessToken, p)
	clearPreSignin(w)
	s.log.InfoContext(ctx, "audit", slog.Group("audit", "action", "console.signin.oidc", "client", p.Subject))
	// A page, not a redirect: the browser came from the provider, another
	// site, and does not send a SameSite=Strict cookie along a redirect
	// chain that crossed sites. The page's own refresh is a navigation
	// from the console, which does.
	s.render(w, r, sess, http.StatusOK, "signedin", "Signed in", nil, name)
}

// providerError returns code if it is one of the error codes of RFC 6749
// (sections 4.1.2.1 and 5.2) or OpenID Connect Core (3.1.2.6), else
// "error": the page never repeats text of the provider's redirect that
// anyone could have written.
func providerError(code string) string {
	switch code {
	case "access_denied", "invalid_request", "unauthorized_client", "unsupported_response_type", "invalid_scope",
		"server_error", "temporarily_unavailable", "invalid_client", "invalid_grant", "unsupported_grant_type",
		"interaction_required", "login_required", "account_selection_required", "consent_required",
		"invalid_request_uri", "invalid_request_object", "request_not_supported", "request_uri_not_supported",
		"registration_not_supported":
		return code
	}
	return "error"
}

// oidcRefused logs a refused sign-in and answers it with a page that
// says why and leads back to the sign-in page. No session is made.
func (s *Server) oidcRefused(w http.ResponseWriter, r *http.Request, status int, reason string, err error, heading, text string) {
	attrs := []any{"reason", reason}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	s.log.WarnContext(r.Context(), "console OpenID Connect sign-in refused", attrs...)
	s.render(w, r, nil, status, "message", heading, nil, Message{Heading: heading, Text: text, Back: "/signin"})
}
