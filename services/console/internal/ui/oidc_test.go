package ui

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/services/console/internal/oidcprovider"
	"github.com/paysuite/payments/test/support/logtest"
)

// oidcEnv is a console with OpenID Connect sign-in, its real pkg/auth
// verifier trusting the test issuer, and the test provider, whose access
// tokens that issuer signs (or, with foreign set, another issuer the
// console does not trust).
type oidcEnv struct {
	url     string // the console, over TLS (its cookies are Secure)
	tls     *http.Client
	idp     *oidcprovider.Provider
	issuer  *authtest.TestIssuer
	foreign atomic.Bool
	logs    *logtest.Buffer
	srv     *Server
}

func newOIDCEnv(t *testing.T) *oidcEnv {
	t.Helper()
	e := &oidcEnv{issuer: authtest.New(t), logs: &logtest.Buffer{}}
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	verifier, err := auth.NewVerifier(t.Context(), e.issuer.Config(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = verifier.Close(context.Background()) })
	other := authtest.New(t)
	e.idp = oidcprovider.New(t, oidcprovider.Options{ClientID: "console", ClientSecret: "console-secret",
		AccessToken: func(sub string, scopes []string) (string, error) {
			signer := e.issuer
			if e.foreign.Load() {
				signer = other
			}
			return signer.Key().Sign(auth.Claims{Issuer: authtest.Issuer, Audience: auth.DefaultAudience, Subject: sub,
				Scopes: scopes, TTL: time.Hour})
		}})
	var handler atomic.Pointer[chi.Mux]
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.Load().ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	e.url, e.tls = srv.URL, srv.Client()
	redirect := srv.URL + "/oidc/callback"
	e.idp.SetRedirectURL(redirect)
	down := Upstream{Name: "down", URL: "http://127.0.0.1:1"}
	s, err := New(Config{Transfers: down, Ledger: down, Antifraud: down, Notifications: down,
		OIDC: OIDC{Issuer: e.idp.URL, ClientID: "console", ClientSecret: "console-secret", RedirectURL: redirect,
			Scopes: []string{"openid", auth.ScopeOperations}, Name: "Test IdP"}}, verifier, log)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = s
	r := chi.NewRouter()
	s.Mount(r)
	handler.Store(r)
	return e
}

// browser is one user agent: a cookie jar, redirects not followed.
type browser struct {
	e   *oidcEnv
	c   *http.Client
	jar *cookiejar.Jar
}

func (e *oidcEnv) browser(t *testing.T) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := *e.tls
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{e: e, c: &c, jar: jar}
}

type answer struct {
	status   int
	location string
	body     string
	cookies  []*http.Cookie
}

func (b *browser) get(t *testing.T, u string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(body), cookies: resp.Cookies()}
}

// cookie returns the jar's cookie name for path of the console.
func (b *browser) cookie(t *testing.T, name, path string) string {
	t.Helper()
	u, _ := url.Parse(b.e.url + path)
	for _, c := range b.jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// plant gives the browser a cookie of the console, as the console sets
// it.
func (b *browser) plant(t *testing.T, name, value, path string) {
	t.Helper()
	u, _ := url.Parse(b.e.url + path)
	b.jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: path, HttpOnly: true, Secure: true,
		SameSite: http.SameSiteLaxMode}})
}

// start opens the sign-in page (the pre-sign-in session) and follows
// the "Sign in with" link to the provider: it returns the authorization
// request's URL.
func (b *browser) start(t *testing.T) string {
	t.Helper()
	page := b.get(t, b.e.url+"/signin")
	if page.status != http.StatusOK || !strings.Contains(page.body, `href="/oidc/login"`) || !strings.Contains(page.body, "Sign in with Test IdP") {
		t.Fatalf("sign-in page = %d without the Sign in with Test IdP link:\n%s", page.status, page.body)
	}
	a := b.get(t, b.e.url+"/oidc/login")
	if a.status != http.StatusFound || !strings.HasPrefix(a.location, b.e.idp.URL+"/authorize?") {
		t.Fatalf("GET /oidc/login = %d to %q, want 302 to the provider", a.status, a.location)
	}
	return a.location
}

// authorize asks the provider and returns where it sends the browser
// back to.
func (b *browser) authorize(t *testing.T, authURL string) string {
	t.Helper()
	a := b.get(t, authURL)
	if a.status != http.StatusFound || !strings.HasPrefix(a.location, b.e.url+"/oidc/callback?") {
		t.Fatalf("GET authorize = %d to %q (%s), want 302 to the callback", a.status, a.location, a.body)
	}
	return a.location
}

// signedIn reports whether the browser's session opens the find page.
func (b *browser) signedIn(t *testing.T) bool {
	t.Helper()
	a := b.get(t, b.e.url+"/find")
	return a.status == http.StatusOK
}

// withParam is u with its query parameter name set to value.
func withParam(t *testing.T, u, name, value string) string {
	t.Helper()
	return editQuery(t, u, func(q url.Values) { q.Set(name, value) })
}

// withoutParam is u without its query parameter name.
func withoutParam(t *testing.T, u, name string) string {
	t.Helper()
	return editQuery(t, u, func(q url.Values) { q.Del(name) })
}

// editQuery is u with its query changed by edit.
func editQuery(t *testing.T, u string, edit func(url.Values)) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	edit(q)
	p.RawQuery = q.Encode()
	return p.String()
}

// TestOIDCSignIn: the code flow signs an operator in with state, nonce
// and PKCE kept in a signed cookie sent only to the callback (nothing on
// the server until the sign-in completes), under a new session id, and
// the page that ends it leads on to the find page without a redirect.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	e := newOIDCEnv(t)
	b := e.browser(t)
	authURL := b.start(t)
	if c := b.cookie(t, CookieName, "/"); c != "" {
		t.Errorf("a session cookie %q before sign-in", c)
	}
	if n := e.srv.sessions.size(); n != 0 {
		t.Errorf("%d sessions kept before sign-in, want 0", n)
	}
	q, _ := url.Parse(authURL)
	params := q.Query()
	for _, name := range []string{"state", "nonce", "code_challenge"} {
		if params.Get(name) == "" {
			t.Errorf("authorization request lacks %s: %s", name, authURL)
		}
	}
	if got := params.Get("code_challenge_method"); got != "S256" {
		t.Errorf("code_challenge_method = %q, want S256", got)
	}
	if got := params.Get("scope"); got != "openid operacoes" {
		t.Errorf("scope = %q, want openid operacoes", got)
	}
	login := b.cookie(t, LoginCookieName, "/oidc/callback")
	if login == "" || login == params.Get("state") || login == params.Get("nonce") || b.cookie(t, LoginCookieName, "/find") != "" {
		t.Errorf("login cookie %q: want a signed value, neither the state nor the nonce, sent only to the callback", login)
	}
	if !strings.Contains(login, ".") {
		t.Errorf("login cookie %q is not a signed value", login)
	}
	callback := b.authorize(t, authURL)
	a := b.get(t, callback)
	if a.status != http.StatusOK || !strings.Contains(a.body, `<meta http-equiv="refresh" content="0;url=/find">`) ||
		!strings.Contains(a.body, "Signed in as <strong>ana</strong>") {
		t.Fatalf("callback = %d, want 200 with a refresh to /find, signed in as ana:\n%s", a.status, a.body)
	}
	var session, cleared *http.Cookie
	for _, c := range a.cookies {
		switch {
		case c.Name == CookieName && c.Value != "":
			session = c
		case c.Name == LoginCookieName && c.MaxAge < 0:
			cleared = c
		}
	}
	if session == nil || !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie = %+v, want a new HttpOnly, Secure, SameSite=Strict one", session)
	}
	if cleared == nil {
		t.Errorf("the login cookie was not cleared: %+v", a.cookies)
	}
	if after := b.cookie(t, CookieName, "/"); after == "" {
		t.Error("no session cookie after sign-in")
	}
	if !b.signedIn(t) {
		t.Error("the new session does not open the find page")
	}
	if !strings.Contains(e.logs.String(), `"action":"console.signin.oidc","client":"ana"`) {
		t.Errorf("no audit line of the sign-in:\n%s", e.logs.String())
	}
}

// TestOIDCSignInRefused: every way a sign-in can go wrong answers a 4xx
// page that says why, and leaves nobody signed in.
func TestOIDCSignInRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		login  oidcprovider.Login
		scopes []string // the console's scopes; openid operacoes when nil
		// callback returns the URL the browser goes back to, given the
		// provider's answer; the provider's answer when nil.
		callback func(t *testing.T, e *oidcEnv, b *browser, back string) string
		foreign  bool
		// other sends the provider's answer from another browser (an
		// attacker's link followed by a victim), without the login cookie.
		other  bool
		status int
		want   string
		reason string
	}{
		{name: "the user refuses at the provider", login: oidcprovider.Login{Subject: "ana", Deny: "access_denied"},
			status: http.StatusForbidden, want: "Test IdP refused the sign-in (access_denied)", reason: "provider_error"},
		{name: "state does not match", status: http.StatusBadRequest, want: "state mismatch", reason: "state_mismatch",
			callback: func(t *testing.T, _ *oidcEnv, _ *browser, back string) string {
				return withParam(t, back, "state", "forged")
			}},
		{name: "state missing", status: http.StatusBadRequest, want: "state mismatch", reason: "state_mismatch",
			callback: func(t *testing.T, _ *oidcEnv, _ *browser, back string) string {
				return withoutParam(t, back, "state")
			}},
		{name: "no sign-in under way in this browser", status: http.StatusBadRequest, want: "unknown, expired or already finished",
			reason: "state_unknown", other: true},
		{name: "the ID token carries another nonce", login: oidcprovider.Login{Subject: "ana", Nonce: "someone-else"},
			status: http.StatusUnauthorized, want: "nonce mismatch", reason: "nonce_mismatch"},
		{name: "the ID token has expired", login: oidcprovider.Login{Subject: "ana", IDTokenTTL: -time.Minute},
			status: http.StatusUnauthorized, want: "has expired", reason: "id_token_expired"},
		{name: "the access token lacks operacoes", login: oidcprovider.Login{Subject: "loja", Scopes: []string{auth.ScopeTransfersRead}},
			status: http.StatusForbidden, want: "does not grant the operacoes scope", reason: "no_operacoes"},
		{name: "the access token is not one the services trust", foreign: true,
			status: http.StatusUnauthorized, want: "was refused (token signed by an unknown key)", reason: "access_token_refused"},
		{name: "the provider gives no code", status: http.StatusBadRequest, want: "no authorization code", reason: "no_code",
			callback: func(t *testing.T, _ *oidcEnv, _ *browser, back string) string {
				return withoutParam(t, back, "code")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newOIDCEnv(t)
			if tc.login.Subject != "" {
				e.idp.SetLogin(tc.login)
			}
			e.foreign.Store(tc.foreign)
			b := e.browser(t)
			back := b.authorize(t, b.start(t))
			if tc.callback != nil {
				back = tc.callback(t, e, b, back)
			}
			client := b
			if tc.other {
				client = e.browser(t)
			}
			a := client.get(t, back)
			if a.status != tc.status || !strings.Contains(a.body, tc.want) {
				t.Errorf("callback = %d, want %d with %q:\n%s", a.status, tc.status, tc.want, a.body)
			}
			if !strings.Contains(a.body, `href="/signin"`) {
				t.Errorf("the refusal page does not lead back to the sign-in page:\n%s", a.body)
			}
			if b.signedIn(t) || client.signedIn(t) {
				t.Error("a refused sign-in left a signed-in session")
			}
			if !strings.Contains(e.logs.String(), `"reason":"`+tc.reason+`"`) {
				t.Errorf("no log line with reason %s:\n%s", tc.reason, e.logs.String())
			}
			if strings.Contains(e.logs.String(), "console.signin") {
				t.Errorf("a refused sign-in was audited as one:\n%s", e.logs.String())
			}
		})
	}
}

// TestOIDCStateIsSpent: a callback is answered once. The same answer
// again, even with the login cookie it came with, signs nobody in.
func TestOIDCStateIsSpent(t *testing.T) {
	t.Parallel()
	e := newOIDCEnv(t)
	b := e.browser(t)
	back := b.authorize(t, b.start(t))
	login := b.cookie(t, LoginCookieName, "/oidc/callback")
	if a := b.get(t, back); a.status != http.StatusOK {
		t.Fatalf("first callback = %d, want 200:\n%s", a.status, a.body)
	}
	replay := e.browser(t)
	replay.plant(t, LoginCookieName, login, "/oidc/callback")
	a := replay.get(t, back)
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "already finished") {
		t.Errorf("replayed callback = %d, want 400 saying the sign-in is finished:\n%s", a.status, a.body)
	}
	if replay.signedIn(t) {
		t.Error("a replayed callback signed a browser in")
	}
}

// TestOIDCCodeNeedsItsVerifier: a code issued to one sign-in and slipped
// into another (code injection) is exchanged with the other sign-in's
// PKCE verifier; the provider refuses it and nobody is signed in.
func TestOIDCCodeNeedsItsVerifier(t *testing.T) {
	t.Parallel()
	e := newOIDCEnv(t)
	attacker, victim := e.browser(t), e.browser(t)
	stolen, _ := url.Parse(attacker.authorize(t, attacker.start(t)))
	back := withParam(t, victim.authorize(t, victim.start(t)), "code", stolen.Query().Get("code"))
	a := victim.get(t, back)
	if a.status != http.StatusUnauthorized || !strings.Contains(a.body, "refused to exchange the sign-in code (invalid_grant)") {
		t.Errorf("callback with another sign-in's code = %d, want 401 invalid_grant:\n%s", a.status, a.body)
	}
	if got := e.idp.Refusals(); !slices.Contains(got, "invalid_grant: PKCE verification failed") {
		t.Errorf("provider refusals = %q, want the PKCE check among them", got)
	}
	if victim.signedIn(t) || attacker.signedIn(t) {
		t.Error("an injected code signed a browser in")
	}
}

// TestPastedTokenSignInRotatesSession: the pasted-token sign-in, checked
// by the real pkg/auth verifier, replaces the pre-sign-in session id.
func TestPastedTokenSignInRotatesSession(t *testing.T) {
	t.Parallel()
	e := newOIDCEnv(t)
	b := e.browser(t)
	page := b.get(t, e.url+"/signin")
	m := csrfField.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no CSRF field:\n%s", page.body)
	}
	before := b.cookie(t, CookieName, "/")
	form := url.Values{"csrf": {m[1]}, "token": {e.issuer.Token(t, "ana", auth.ScopeOperations)}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/signin", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in = %d, want 303", resp.StatusCode)
	}
	if after := b.cookie(t, CookieName, "/"); after == before || after == "" || !b.signedIn(t) {
		t.Errorf("session id %q after sign-in, %q before: want a new, signed-in one", after, before)
	}
	old := e.browser(t)
	old.plant(t, CookieName, before, "/")
	if old.signedIn(t) {
		t.Error("the pre-sign-in session id opens the find page")
	}
}

// TestOIDCProviderDown: a provider that does not answer leaves the
// pasted-token sign-in working and answers "Sign in with" with a 502
// page that says so.
func TestOIDCProviderDown(t *testing.T) {
	t.Parallel()
	down := Upstream{Name: "down", URL: "http://127.0.0.1:1"}
	s, err := New(Config{Transfers: down, Ledger: down, Antifraud: down, Notifications: down,
		OIDC: OIDC{Issuer: "http://127.0.0.1:1", ClientID: "console", ClientSecret: "x",
			RedirectURL: "https://console.example/oidc/callback", Scopes: []string{"openid"}, Name: "Gone IdP"}},
		nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.DiscoverOIDC(t.Context()) // logged, not fatal
	r := chi.NewRouter()
	s.Mount(r)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/oidc/login", nil))
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "Gone IdP cannot be reached") {
		t.Errorf("GET /oidc/login = %d, want 502 naming the provider:\n%s", rec.Code, rec.Body.String())
	}
	if c := rec.Result().Cookies(); len(c) != 0 {
		t.Errorf("cookies %+v set by a sign-in that could not start", c)
	}
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/signin", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `name="token"`) {
		t.Errorf("GET /signin = %d, want the pasted-token form", rec.Code)
	}
}
