package console_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/services/console"
	"github.com/paysuite/payments/services/console/internal/oidcprovider"
	"github.com/paysuite/payments/test/e2e"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/poll"
)

// freeAddr returns a loopback address no one listens on now: the
// console's redirect URL names its port before it starts.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(tb.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return addr
}

// TestConsoleOIDCInBrowser: in Chromium, "Sign in with Test IdP" goes to
// the provider, which lives on another site (localhost, the console on
// 127.0.0.1) as a real one does, and back; the operator lands on the
// find page, signed in, and the provider's access token opens the
// services' /ops APIs of the real suite on the shared PostgreSQL and
// Kafka.
func TestConsoleOIDCInBrowser(t *testing.T) {
	s := e2e.NewSuite(t, e2e.Options{Partitions: 2})
	idp := oidcprovider.New(t, oidcprovider.Options{ClientID: "console", ClientSecret: "console-secret", Host: "localhost",
		ConsentPage: true,
		AccessToken: func(sub string, scopes []string) (string, error) {
			return s.Issuer.Key().Sign(auth.Claims{Issuer: authtest.Issuer, Audience: auth.DefaultAudience, Subject: sub,
				Scopes: scopes, TTL: time.Hour})
		}})
	addr := freeAddr(t)
	redirect := "http://" + addr + console.CallbackPath
	idp.SetRedirectURL(redirect)
	logs := &logtest.Buffer{}
	consoleURL := startConsole(t, s, logs, func(c *console.Config) {
		c.HTTPAddr = addr
		c.OIDC = console.OIDCConfig{Issuer: idp.URL, ClientID: "console", ClientSecret: "console-secret",
			RedirectURL: redirect, Scopes: []string{"openid", auth.ScopeOperations}, Name: "Test IdP"}
	})
	e := &env{suite: s, url: consoleURL, browser: newBrowser(t)}
	account := "OIDC-" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	s.OpenAccount(t, account, "BRL")
	s.Deposit(t, account, 12_345)

	t.Run("sign-in page offers the provider", func(t *testing.T) {
		e.run(t, "open sign-in", chromedp.Navigate(e.url+"/signin"), chromedp.WaitVisible(chromedp.CSS("#oidc")))
		if got := e.text(t, "#oidc"); got != "Sign in with Test IdP" {
			t.Errorf("link = %q, want Sign in with Test IdP", got)
		}
		e.screenshot(t, "signin-oidc.png")
	})

	t.Run("sign in at the provider", func(t *testing.T) {
		e.run(t, "go to the provider", chromedp.Navigate(e.url+"/signin"), chromedp.WaitVisible(chromedp.CSS("#oidc")),
			chromedp.Click(chromedp.CSS("#oidc")), chromedp.WaitVisible(chromedp.CSS("#consent")))
		if loc := value(t, e, "location", chromedp.Location()); !strings.HasPrefix(loc, idp.URL+"/authorize?") {
			t.Errorf("at %s, want the provider's authorization page", loc)
		}
		e.run(t, "sign in at the provider", chromedp.Click(chromedp.CSS("#consent")), chromedp.WaitVisible(chromedp.CSS("#q")))
		poll.Until(t, 30*time.Second, "the find page", func() (bool, string) {
			loc := value(t, e, "location", chromedp.Location())
			return loc == e.url+"/find", loc
		})
		if got := e.text(t, ".who"); !strings.Contains(got, "ana") {
			t.Errorf("header = %q, want the operator ana", got)
		}
		ctx, cancel := context.WithTimeout(e.browser, 30*time.Second)
		defer cancel()
		cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{e.url, e.url + console.CallbackPath}})
		if err != nil {
			t.Fatal(err)
		}
		var session *network.Cookie
		for _, c := range cookies.Cookies {
			switch c.Name {
			case "console_session":
				session = c
			case "console_oidc":
				t.Errorf("the login cookie outlived the sign-in: %+v", c)
			}
		}
		if session == nil || !session.HTTPOnly || !session.Secure || session.SameSite != network.CookieSameSiteStrict {
			t.Errorf("session cookie = %+v, want an HttpOnly, Secure, SameSite=Strict one", session)
		}
		e.screenshot(t, "")
		if !strings.Contains(logs.String(), `"action":"console.signin.oidc","client":"ana"`) {
			t.Errorf("no audit line of the sign-in:\n%s", logs.String())
		}
	})

	t.Run("the access token from the provider opens the services", func(t *testing.T) {
		e.find(t, account)
		if got := e.text(t, "#balance"); got != "123.45 BRL" {
			t.Errorf("balance = %q, want 123.45 BRL", got)
		}
		e.screenshot(t, "")
	})
}
