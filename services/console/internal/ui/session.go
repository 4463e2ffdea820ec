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

// sessions is the in-memory session store. A restart signs everyone out,
// which a console for a handful of operators can afford.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	ttl  time.Duration
	now  func() time.Time
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{byID: map[string]*session{}, ttl: ttl, now: time.Now}
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
