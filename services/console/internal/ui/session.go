package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/periodic"
)

// CookieName is the session cookie: an opaque random id; the token stays
// on the server.
const CookieName = "console_session"

// DefaultMaxSessions is how many signed-in sessions are kept when
// Config.MaxSessions is unset; past it the oldest is ended.
const DefaultMaxSessions = 1000

// sweepEvery is how often expired sessions are dropped.
const sweepEvery = time.Minute

// maxFormTokens bounds the outstanding form tokens of one session (the
// oldest go first: a page left open for long asks for a fresh load).
const maxFormTokens = 64

// session is one signed-in operator's state: the bearer token and
// principal. Nothing is kept for a browser that is not signed in.
type session struct {
	id        string
	token     string // the operator's bearer token
	principal auth.Principal
	created   time.Time
	expires   time.Time
	// forms are the one-time CSRF tokens of the forms rendered for this
	// session, with their issue time: a token is spent by its first
	// POST, so a replayed or double-submitted form is refused.
	forms   map[string]time.Time
	actions []time.Time // recent actions, for the rate limit
}

func (s *session) signedIn() bool { return s != nil && s.token != "" }

// sessions is the in-memory store of signed-in sessions, at most max of
// them, the oldest ended first; expired ones are dropped by sweep, which
// Sweep runs on a timer. A restart signs everyone out, which a console for
// a handful of operators can afford. What a browser needs before sign-in
// (the sign-in form's CSRF token, an OpenID sign-in's state) travels in
// signed cookies (signin.go).
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	// signedStates are the OpenID states whose sign-in completed, until
	// their login cookie expires: a callback signs in once.
	signedStates map[string]time.Time
	ttl          time.Duration
	max          int
	now          func() time.Time
	signer       cookieSigner
}

func newSessions(ttl time.Duration, maxSessions int) *sessions {
	if maxSessions <= 0 {
		maxSessions = DefaultMaxSessions
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	return &sessions{byID: map[string]*session{}, signedStates: map[string]time.Time{}, ttl: ttl, max: maxSessions,
		now: time.Now, signer: cookieSigner{key: key}}
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

// create starts the session of an operator signed in with token and sets
// its cookie; at the cap, the oldest session ends.
func (st *sessions) create(w http.ResponseWriter, token string, p auth.Principal) *session {
	s := &session{id: randomToken(), token: token, principal: p, forms: map[string]time.Time{}}
	st.mu.Lock()
	now := st.now()
	s.created, s.expires = now, now.Add(st.ttl)
	for len(st.byID) >= st.max {
		st.evictOldest()
	}
	st.byID[s.id] = s
	st.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.id, Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(st.ttl.Seconds())})
	return s
}

// evictOldest ends the session created first. A scan: it runs only at a
// sign-in past the cap, and sign-ins need an operator's token.
func (st *sessions) evictOldest() {
	var oldest *session
	for _, s := range st.byID {
		if oldest == nil || s.created.Before(oldest.created) {
			oldest = s
		}
	}
	delete(st.byID, oldest.id)
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

// markSignedIn records that the OpenID sign-in of state completed.
func (st *sessions) markSignedIn(state string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.signedStates[state] = st.now().Add(loginTTL)
}

// spent reports whether the OpenID sign-in of state already completed.
func (st *sessions) spent(state string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.signedStates[state]
	return ok
}

// sweep drops the expired sessions and completed states.
func (st *sessions) sweep() {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	for id, s := range st.byID {
		if now.After(s.expires) {
			delete(st.byID, id)
		}
	}
	for state, until := range st.signedStates {
		if now.After(until) {
			delete(st.signedStates, state)
		}
	}
}

// sweepLoop sweeps every interval until ctx ends.
func (st *sessions) sweepLoop(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, periodic.Fixed(interval), st.sweep)
}

// size is the number of sessions kept.
func (st *sessions) size() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.byID)
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
