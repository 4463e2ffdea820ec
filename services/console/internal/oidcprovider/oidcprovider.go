// Package oidcprovider is an OpenID Connect provider for tests, in
// process: discovery, a JWKS, an authorization endpoint that signs the
// configured user in at once and redirects back with a code, and a token
// endpoint that checks the client, the redirect URI and the PKCE verifier
// (S256) before it answers with an ID token and an access token. With
// Options.ConsentPage the user presses a button on the provider's page
// first, as in a browser at a real provider.
//
// The ID tokens are signed with the provider's own ES256 key, served by
// its JWKS; the access tokens are made by a function the test gives (for
// the suite, one signed by the authtest issuer whose JWKS the services and
// the console's pkg/auth trust), as an identity provider issues access
// tokens for the APIs behind it.
package oidcprovider

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Options configure a provider.
type Options struct {
	// ClientID, ClientSecret and RedirectURL are the one registered
	// client. RedirectURL may be set later with SetRedirectURL, once the
	// client's address is known.
	ClientID, ClientSecret, RedirectURL string
	// Host, when set, names the provider's host in its URLs instead of
	// 127.0.0.1: "localhost" puts it on another site than a client on
	// 127.0.0.1, as a real identity provider is, so that the browser
	// treats the return from it as a cross-site navigation.
	Host string
	// AccessToken returns the access token issued to subject for the
	// granted scopes. Required.
	AccessToken func(subject string, scopes []string) (string, error)
	// ConsentPage makes the authorization endpoint answer a page whose
	// button (a form posted to the provider) signs the user in, as a real
	// provider's login page does: the way back to the client is then a
	// navigation the provider's page started, which a browser treats as
	// cross-site. Without it the endpoint redirects back at once.
	ConsentPage bool
}

// Login is how the provider answers the next authorizations.
type Login struct {
	// Subject is the user who signs in.
	Subject string
	// Scopes, when not nil, are granted instead of the requested ones
	// (openid aside).
	Scopes []string
	// Deny, when set, is the error the authorization endpoint redirects
	// back with (access_denied: the user refused).
	Deny string
	// IDTokenTTL is the ID token's lifetime; 5 minutes when zero. A
	// negative one issues a token that has already expired.
	IDTokenTTL time.Duration
	// Nonce, when set, is put in the ID token instead of the nonce of the
	// authorization request.
	Nonce string
}

// Provider is a running test provider.
type Provider struct {
	// URL is the issuer: discovery is at URL + /.well-known/openid-configuration.
	URL string

	opts Options
	key  jwk.Key // ES256 private key of the ID tokens

	mu       sync.Mutex
	redirect string
	login    Login
	grants   map[string]grant // by authorization code
	waiting  map[string]grant // by consent page, until its button is pressed
	refusals []string
}

// grant is an issued authorization code.
type grant struct {
	challenge, nonce, redirect, state, subject string
	scopes                                     []string
	login                                      Login
}

// New starts a provider that signs in "ana" by default; it stops at the
// end of the test.
func New(tb testing.TB, opts Options) *Provider {
	tb.Helper()
	if opts.ClientID == "" || opts.AccessToken == nil {
		tb.Fatal("oidcprovider: ClientID and AccessToken are required")
	}
	raw, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := jwk.Import(raw)
	if err != nil {
		tb.Fatal(err)
	}
	if err := jwk.AssignKeyID(key); err != nil {
		tb.Fatal(err)
	}
	if err := key.Set(jwk.AlgorithmKey, jwa.ES256()); err != nil {
		tb.Fatal(err)
	}
	p := &Provider{opts: opts, key: key, redirect: opts.RedirectURL, login: Login{Subject: "ana"}, grants: map[string]grant{},
		waiting: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /consent", p.consent)
	mux.HandleFunc("POST /token", p.token)
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	p.URL = srv.URL
	if opts.Host != "" {
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p.URL = "http://" + net.JoinHostPort(opts.Host, port)
	}
	return p
}

// SetRedirectURL registers the client's redirect URI.
func (p *Provider) SetRedirectURL(u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redirect = u
}

// SetLogin sets how the next authorizations are answered.
func (p *Provider) SetLogin(l Login) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.login = l
}

// Refusals are the token endpoint's refusals so far, each as its error
// and description ("invalid_grant: PKCE verification failed").
func (p *Provider) Refusals() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.refusals)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.URL,
		"authorization_endpoint":                p.URL + "/authorize",
		"token_endpoint":                        p.URL + "/token",
		"jwks_uri":                              p.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"grant_types_supported":                 []string{"authorization_code"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	pub, err := p.key.PublicKey()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	writeJSON(w, http.StatusOK, set)
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// authorize answers an authorization request (RFC 6749 section 4.1.1,
// with PKCE and the OpenID nonce required). A request naming another
// client or redirect URI is answered 400 here, never redirected.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	redirect, login := p.redirect, p.login
	p.mu.Unlock()
	if q.Get("client_id") != p.opts.ClientID || q.Get("redirect_uri") == "" || q.Get("redirect_uri") != redirect {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back := func(params url.Values) {
		params.Set("state", q.Get("state"))
		u, _ := url.Parse(redirect)
		u.RawQuery = params.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	scopes := strings.Fields(q.Get("scope"))
	switch {
	case q.Get("response_type") != "code":
		back(url.Values{"error": {"unsupported_response_type"}})
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE with S256 is required"}})
		return
	case q.Get("nonce") == "" || q.Get("state") == "":
		back(url.Values{"error": {"invalid_request"}, "error_description": {"state and nonce are required"}})
		return
	case !slices.Contains(scopes, "openid"):
		back(url.Values{"error": {"invalid_scope"}, "error_description": {"openid is required"}})
		return
	case login.Deny != "":
		back(url.Values{"error": {login.Deny}, "error_description": {"the user refused"}})
		return
	}
	granted := slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return s == "openid" })
	if login.Scopes != nil {
		granted = slices.Clone(login.Scopes)
	}
	g := grant{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: redirect, state: q.Get("state"),
		subject: login.Subject, scopes: granted, login: login}
	if p.opts.ConsentPage {
		id := randomString()
		p.mu.Lock()
		p.waiting[id] = g
		p.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = consentPage.Execute(w, map[string]string{"ID": id, "Subject": g.subject})
		return
	}
	back(url.Values{"code": {p.issue(g)}})
}

var consentPage = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Test IdP</title></head>
<body><h1>Test IdP</h1>
<form method="post" action="/consent"><input type="hidden" name="id" value="{{.ID}}">
<button type="submit" id="consent">Sign in as {{.Subject}}</button></form>
</body></html>
`))

// consent is the consent page's button: the code goes back to the
// client.
func (p *Provider) consent(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	g, ok := p.waiting[r.PostFormValue("id")]
	delete(p.waiting, r.PostFormValue("id"))
	p.mu.Unlock()
	if !ok {
		http.Error(w, "unknown or spent consent page", http.StatusBadRequest)
		return
	}
	u, _ := url.Parse(g.redirect)
	u.RawQuery = url.Values{"code": {p.issue(g)}, "state": {g.state}}.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// issue records g under a new authorization code.
func (p *Provider) issue(g grant) string {
	code := randomString()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.grants[code] = g
	return code
}

// token exchanges an authorization code (RFC 6749 section 4.1.3 and
// RFC 7636 section 4.6). A code is spent by its first exchange, even a
// refused one.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, code, why string) {
		p.mu.Lock()
		p.refusals = append(p.refusals, code+": "+why)
		p.mu.Unlock()
		writeJSON(w, status, map[string]string{"error": code, "error_description": why})
	}
	if err := r.ParseForm(); err != nil {
		refuse(http.StatusBadRequest, "invalid_request", "unreadable form")
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.opts.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(p.opts.ClientSecret)) != 1 {
		refuse(http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		refuse(http.StatusBadRequest, "unsupported_grant_type", "only authorization_code")
		return
	}
	code := r.PostForm.Get("code")
	p.mu.Lock()
	g, found := p.grants[code]
	delete(p.grants, code)
	p.mu.Unlock()
	if !found {
		refuse(http.StatusBadRequest, "invalid_grant", "unknown or spent code")
		return
	}
	if r.PostForm.Get("redirect_uri") != g.redirect {
		refuse(http.StatusBadRequest, "invalid_grant", "redirect_uri does not match")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(g.challenge)) != 1 {
		refuse(http.StatusBadRequest, "invalid_grant", "PKCE verification failed")
		return
	}
	access, err := p.opts.AccessToken(g.subject, g.scopes)
	if err != nil {
		refuse(http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	idToken, err := p.idToken(g, access)
	if err != nil {
		refuse(http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 3600,
		"id_token": idToken, "scope": strings.Join(append([]string{"openid"}, g.scopes...), " ")})
}

// idToken signs g's ID token, with the at_hash of access.
func (p *Provider) idToken(g grant, access string) (string, error) {
	ttl := g.login.IDTokenTTL
	if ttl == 0 {
		ttl = 5 * time.Minute
	}
	now := time.Now()
	iat := now
	if ttl < 0 {
		iat = now.Add(2 * ttl)
	}
	nonce := g.nonce
	if g.login.Nonce != "" {
		nonce = g.login.Nonce
	}
	sum := sha256.Sum256([]byte(access))
	tok, err := jwt.NewBuilder().
		Issuer(p.URL).
		Subject(g.subject).
		Audience([]string{p.opts.ClientID}).
		IssuedAt(iat).
		Expiration(now.Add(ttl)).
		Claim("nonce", nonce).
		Claim("at_hash", base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])).
		Build()
	if err != nil {
		return "", err
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), p.key))
	if err != nil {
		return "", err
	}
	return string(signed), nil
}
