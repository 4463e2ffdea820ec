package ui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/test/support/poll"
)

// TestAnonymousVisitsKeepNothing: a flood of anonymous sign-in pages and
// OpenID sign-ins started keeps no server-side state: each gets its form
// token or its state in a signed cookie.
func TestAnonymousVisitsKeepNothing(t *testing.T) {
	t.Parallel()
	e := newOIDCEnv(t)
	r := chi.NewRouter()
	e.srv.Mount(r)
	for i := range 10_000 {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/signin", nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Set-Cookie"), PreSigninCookieName+"=") {
			t.Fatalf("GET /signin #%d = %d, Set-Cookie %q", i, rec.Code, rec.Header().Get("Set-Cookie"))
		}
	}
	for i := range 1000 {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/oidc/login", nil))
		if rec.Code != http.StatusFound {
			t.Fatalf("GET /oidc/login #%d = %d", i, rec.Code)
		}
	}
	st := e.srv.sessions
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.byID) != 0 || len(st.signedStates) != 0 {
		t.Errorf("after 11,000 anonymous requests: %d sessions, %d states kept, want 0", len(st.byID), len(st.signedStates))
	}
}

// fakeClock is a settable time for the store.
type fakeClock struct{ unix atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.unix.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) now() time.Time          { return time.Unix(0, c.unix.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.unix.Add(int64(d)) }

// TestSessionsCappedOldestEvicted: past the cap, a sign-in ends the oldest
// session and keeps the others.
func TestSessionsCappedOldestEvicted(t *testing.T) {
	t.Parallel()
	c := newClock()
	st := newSessions(time.Hour, 3)
	st.now = c.now
	var ids []string
	for range 5 {
		ids = append(ids, st.create(httptest.NewRecorder(), "op", auth.Principal{Subject: "ana"}).id)
		c.advance(time.Second)
	}
	if n := st.size(); n != 3 {
		t.Errorf("%d sessions kept, want the cap 3", n)
	}
	for i, id := range ids {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/find", nil)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: id, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
		if got, want := st.get(req) != nil, i >= 2; got != want {
			t.Errorf("session %d kept = %v, want %v (the oldest go first)", i, got, want)
		}
	}
}

// TestExpiredSessionsSweptByTimer: expired sessions leave the store on the
// sweep loop's timer, with no request looking at them.
func TestExpiredSessionsSweptByTimer(t *testing.T) {
	t.Parallel()
	c := newClock()
	st := newSessions(time.Minute, 0)
	st.now = c.now
	st.create(httptest.NewRecorder(), "op", auth.Principal{Subject: "ana"})
	st.create(httptest.NewRecorder(), "op", auth.Principal{Subject: "bia"})
	st.markSignedIn("state")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.sweepLoop(ctx, 10*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	poll.Never(t, 100*time.Millisecond, "a live session swept", func() (bool, string) { return st.size() < 2, "" })
	c.advance(loginTTL + time.Minute) // past the sessions and the spent state
	late := st.create(httptest.NewRecorder(), "op", auth.Principal{Subject: "caio"})
	poll.Until(t, 5*time.Second, "the expired sessions swept", func() (bool, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		_, kept := st.byID[late.id]
		return len(st.byID) == 1 && kept && len(st.signedStates) == 0, ""
	})
}

// TestSignedCookies: a sealed value opens only unaltered, as its own
// kind and before it expires.
func TestSignedCookies(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := cookieSigner{key: []byte("k1")}
	raw := c.seal(kindLogin, pendingLogin{State: "s", Nonce: "n", Verifier: "v"}, now.Add(time.Minute))
	var l pendingLogin
	if _, ok := c.open(kindLogin, raw, now, &l); !ok || l != (pendingLogin{State: "s", Nonce: "n", Verifier: "v"}) {
		t.Fatalf("open(seal) = %+v, %v", l, ok)
	}
	body, sig, _ := strings.Cut(raw, ".")
	for name, tc := range map[string]struct {
		signer cookieSigner
		kind   string
		raw    string
		at     time.Time
	}{
		"other key":   {cookieSigner{key: []byte("k2")}, kindLogin, raw, now},
		"other kind":  {c, kindPreSignin, raw, now},
		"expired":     {c, kindLogin, raw, now.Add(time.Minute)},
		"altered":     {c, kindLogin, body[:len(body)-2] + "x" + body[len(body)-1:] + "." + sig, now},
		"no sig":      {c, kindLogin, body, now},
		"garbage sig": {c, kindLogin, body + ".!!", now},
	} {
		if _, ok := tc.signer.open(tc.kind, tc.raw, tc.at, &l); ok {
			t.Errorf("%s: opened", name)
		}
	}
}
