package ui

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
)

// tokenVerifier accepts "op" as an operator and "client" without the
// scope; the browser test uses the real pkg/auth verifier.
type tokenVerifier struct{}

func (tokenVerifier) Verify(_ context.Context, raw string) (auth.Principal, error) {
	switch raw {
	case "op":
		return auth.Principal{Subject: "ana", Scopes: []string{auth.ScopeOperations}}, nil
	case "client":
		return auth.Principal{Subject: "loja", Scopes: []string{auth.ScopeTransfersRead}}, nil
	}
	return auth.Principal{}, errors.New("bad token")
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleOn serves a console whose four upstreams are all svc, configured
// further by cfg (nil: as is), on an httptest TLS server (so the Secure
// cookie travels), with a client that keeps cookies and does not follow
// redirects.
func consoleOn(t *testing.T, svc string, cfg func(*Config)) (*httptest.Server, *http.Client) {
	t.Helper()
	up := func(name string) Upstream { return Upstream{Name: name, URL: svc} }
	c := Config{Transfers: up("transfers"), Ledger: up("ledger"), Antifraud: up("antifraud"), Notifications: up("notifications")}
	if cfg != nil {
		cfg(&c)
	}
	s, err := New(c, tokenVerifier{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	s.Mount(r)
	srv := httptest.NewTLSServer(r)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	client := srv.Client()
	client.Jar = jar
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return srv, client
}

// TestActionsAreRateLimited: a session's actions beyond
// ActionsPerMinute are refused with 429 and never reach the service.
func TestActionsAreRateLimited(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer op" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"reenfileirados":1}`)
	}))
	t.Cleanup(svc.Close)
	srv, c := consoleOn(t, svc.URL, func(c *Config) { c.ActionsPerMinute = 2 })

	csrf := func(path string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := csrfField.FindSubmatch(body)
		if m == nil {
			t.Fatalf("GET %s: no CSRF field (status %d)", path, resp.StatusCode)
		}
		return string(m[1])
	}
	post := func(path string, form url.Values) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	if resp := post("/signin", url.Values{"csrf": {csrf("/signin")}, "token": {"client"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in without operacoes = %d, want 403", resp.StatusCode)
	}
	resp := post("/signin", url.Values{"csrf": {csrf("/signin")}, "token": {"Bearer op"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in = %d, want 303", resp.StatusCode)
	}
	cookie := resp.Header.Get("Set-Cookie")
	for _, attr := range []string{"HttpOnly", "Secure", "SameSite=Strict"} {
		if !strings.Contains(cookie, attr) {
			t.Errorf("session cookie %q lacks %s", cookie, attr)
		}
	}
	id := uuid.NewString()
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		tok := csrf("/actions/requeue?service=transfers&id=" + id)
		if got := post("/actions/requeue", url.Values{"csrf": {tok}, "service": {"transfers"}, "id": {id}}).StatusCode; got != want {
			t.Errorf("action %d = %d, want %d", i+1, got, want)
		}
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("the service got %d requeues, want 2", got)
	}
}
