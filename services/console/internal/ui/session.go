package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/paysuite/payments/pkg/auth"
)

// CookieName is the session cookie: an opaque random id; the token stays
// on the server.
const CookieName = "console_session"

// LoginCookieName carries the id of a sign-in under way at the OpenID
// provider. The session cookie is SameSite=Strict, so the browser does
// not send it with the provider's redirect back to the console (a
// cross-site navigation); this one is SameSite=Lax (sent with top-level
// GET navigations only), scoped to the callback's path, and short-lived.
// It holds an opaque id: state, nonce and PKCE verifier stay on the
// server.
const LoginCookieName = "console_oidc"

// loginTTL bounds the time an operator may spend at the provider.
const loginTTL = 10 * time.Minute

// maxLogins bounds the sign-ins under way (each /oidc/login makes one).
const maxLogins = 10000

// maxFormTokens bounds the outstanding form tokens of one session (the
// oldest go first: a page left open for long asks for a fresh load).
const maxFormTokens = 64

// session is one browser's state: anonymous until sign-in, then the
// operator's bearer token and principal.
type session struct {
	id        string
	token     string // the operator's bearer token; empty when anonymous
	principal auth.Principal
	expires   time.Time
	// forms are the one-time CSRF tokens of the forms rendered for this
	// session, with their issue time: a token is spent by its first
	// POST, so a replayed or double-submitted form is refused.
	forms   map[string]time.Time
	actions []time.Time // recent actions, for the rate limit
}

func (s *session) signedIn() bool { return s.token != "" }

// pendingLogin is an OpenID Connect sign-in under way: what the callback
// must find again, bound to the pre-sign-in session that started it.
type pendingLogin struct {
	state, nonce, verifier string
	sessionID              string // the pre-sign-in session, ended at sign-in
	expires                time.Time
}

// sessions is the in-memory session store. A restart signs everyone out,
// which a console for a handful of operators can afford.
type sessions struct {
	mu     sync.Mutex
	byID   map[string]*session
	logins map[string]*pendingLogin // by the id in LoginCookieName
	ttl    time.Duration
	now    func() time.Time
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{byID: map[string]*session{}, logins: map[string]*pendingLogin{}, ttl: ttl, now: time.Now}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// get returns the live session of r's cookie, or nil.
func (st *sessions) get(r *http.Request) *session {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.byID[c.Value]
	if s == nil {
		return nil
	}
	if st.now().After(s.expires) {
		delete(st.byID, s.id)
		return nil
	}
	return s
}

// create starts a new session (anonymous when token is empty) and sets
// its cookie; expired sessions are swept on the way.
func (st *sessions) create(w http.ResponseWriter, token string, p auth.Principal) *session {
	s := &session{id: randomToken(), token: token, principal: p, forms: map[string]time.Time{}}
	st.mu.Lock()
	now := st.now()
	s.expires = now.Add(st.ttl)
	for id, old := range st.byID {
		if now.After(old.expires) {
			delete(st.byID, id)
		}
	}
	st.byID[s.id] = s
	st.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.id, Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(st.ttl.Seconds())})
	return s
}

// destroy ends s and clears the cookie.
func (st *sessions) destroy(w http.ResponseWriter, s *session) {
	if s != nil {
		st.mu.Lock()
		delete(st.byID, s.id)
		st.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// startLogin records l, a sign-in started by session s, and sets its
// cookie (which replaces the cookie of a sign-in started before in the
// same browser: that one then expires unused). Expired sign-ins are
// swept on the way.
func (st *sessions) startLogin(w http.ResponseWriter, s *session, l pendingLogin) {
	id := randomToken()
	l.sessionID = s.id
	st.mu.Lock()
	now := st.now()
	l.expires = now.Add(loginTTL)
	for k, old := range st.logins {
		if now.After(old.expires) {
			delete(st.logins, k)
		}
	}
	if len(st.logins) >= maxLogins {
		// A flood of /oidc/login: one sign-in under way makes room, and
		// its operator starts again.
		for k := range st.logins {
			delete(st.logins, k)
			break
		}
	}
	st.logins[id] = &l
	st.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: LoginCookieName, Value: id, Path: "/oidc/callback", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteLaxMode, MaxAge: int(loginTTL.Seconds())})
}

// takeLogin returns the live sign-in of r's login cookie and forgets it
// (a callback is answered once), clearing the cookie; nil when there is
// none.
func (st *sessions) takeLogin(w http.ResponseWriter, r *http.Request) *pendingLogin {
	c, err := r.Cookie(LoginCookieName)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: LoginCookieName, Value: "", Path: "/oidc/callback", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
	st.mu.Lock()
	defer st.mu.Unlock()
	l := st.logins[c.Value]
	delete(st.logins, c.Value)
	if l == nil || st.now().After(l.expires) {
		return nil
	}
	return l
}

// end ends the session with id, if it is still there (the pre-sign-in
// session of a sign-in whose cookie the callback did not carry).
func (st *sessions) end(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.byID, id)
}

// formToken issues a one-time CSRF token for one rendered form of s.
func (st *sessions) formToken(s *session) string {
	t := randomToken()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(s.forms) >= maxFormTokens {
		var oldest string
		var at time.Time
		for k, v := range s.forms {
			if oldest == "" || v.Before(at) {
				oldest, at = k, v
			}
		}
		delete(s.forms, oldest)
	}
	s.forms[t] = st.now()
	return t
}

// spend checks a submitted CSRF token against s and spends it: true only
// the first time a token s issued comes back.
func (st *sessions) spend(s *session, token string) bool {
	if s == nil || token == "" {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for k := range s.forms {
		if subtle.ConstantTimeCompare([]byte(k), []byte(token)) == 1 {
			delete(s.forms, k)
			return true
		}
	}
	return false
}

// allowAction records an action of s unless it already did perMinute in
// the last minute.
func (st *sessions) allowAction(s *session, perMinute int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	kept := s.actions[:0]
	for _, t := range s.actions {
		if now.Sub(t) < time.Minute {
			kept = append(kept, t)
		}
	}
	s.actions = kept
	if len(kept) >= perMinute {
		return false
	}
	s.actions = append(s.actions, now)
	return true
}
