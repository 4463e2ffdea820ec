package auth_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/httpapi"
)

// cached is an authenticator with its token cache on, its metrics in reg,
// a clock the test moves, and a router as the services build it.
type cached struct {
	iss     *authtest.TestIssuer
	authn   *auth.Authenticator
	reg     *prometheus.Registry
	handler http.Handler
	reached atomic.Int64

	mu  sync.Mutex
	now time.Time
}

func newCached(t *testing.T, edit func(*auth.Config)) *cached {
	t.Helper()
	c := &cached{iss: authtest.New(t), reg: prometheus.NewRegistry(), now: time.Now()}
	cfg := c.iss.Config()
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	a, err := auth.New(ctx, cfg, log, c.reg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.Close(context.Background())
		cancel()
	})
	c.authn = a
	auth.SetClock(a.Verifier(), c.clock)
	r := httpapi.NewRouter(log, nil, nil, nil, a.Middleware)
	ok := func(w http.ResponseWriter, _ *http.Request) {
		c.reached.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}
	auth.Mount(r, log, []auth.Route{
		{Method: http.MethodPost, Pattern: "/transferencias", Scope: auth.ScopeTransfersCreate, Handler: ok},
		{Method: http.MethodGet, Pattern: "/transferencias/{id}", Scope: auth.ScopeTransfersRead, Handler: ok},
	})
	c.handler = r
	return c
}

func (c *cached) clock() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// pastExp moves a test's clock past the exp (and its leeway) of a token
// issued for an hour after the clock was read: the clock starts before the
// token is signed, in another second at times, so an hour and the leeway
// alone could leave it a fraction of a second short of exp, which is in
// whole seconds.
const pastExp = time.Hour + auth.Leeway + time.Minute

func (c *cached) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// do sends method path with the Authorization header authorization ("":
// none) and returns the status and the WWW-Authenticate challenge.
func (c *cached) do(t *testing.T, method, path, authorization string) (int, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(`{}`))
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	c.handler.ServeHTTP(w, req)
	return w.Code, w.Header().Get("WWW-Authenticate")
}

// metric returns the value of the metric name in c's registry.
func (c *cached) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := c.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// warm sends bearer until it is answered from the cache (the second
// request, or the third when the first one refetched the key set), and
// fails t if it is not accepted.
func (c *cached) warm(t *testing.T, bearer string) {
	t.Helper()
	hits := c.metric(t, "auth_token_cache_hits_total")
	for range 3 {
		if code, _ := c.do(t, http.MethodPost, "/transferencias", bearer); code != http.StatusAccepted {
			t.Fatalf("warming the cache: %d, want 202", code)
		}
		if c.metric(t, "auth_token_cache_hits_total") == hits+1 {
			return
		}
	}
	t.Fatalf("a token sent three times was never a cache hit")
}

// TestCachedTokenRefusals: every refusal case of CONTRACTS.md section 8 is
// still refused with the cache warm, by the token that warmed it or by
// one differing from it in a byte, its claims or its key.
func TestCachedTokenRefusals(t *testing.T) {
	t.Parallel()
	invalid := authtest.ChallengeInvalid
	for _, tc := range []struct {
		name string
		// refused returns the Authorization to send once good is cached.
		refused   func(t *testing.T, c *cached, good string) string
		status    int
		challenge string
	}{
		{"no token", func(*testing.T, *cached, string) string { return "" }, 401, authtest.ChallengeMissing},
		{"malformed: the cached token cut short", func(_ *testing.T, _ *cached, good string) string {
			return good[:len(good)-1] + "."
		}, 401, invalid},
		{"malformed: the cached token twice", func(_ *testing.T, _ *cached, good string) string {
			return good + ", " + good
		}, 401, invalid},
		{"bad signature: one byte of the cached token's signature", func(_ *testing.T, _ *cached, good string) string {
			return flipSignatureByte(good)
		}, 401, invalid},
		{"bad signature: the cached token's signature on other claims", func(t *testing.T, c *cached, good string) string {
			other := strings.Split(c.iss.Bearer(t, "client-b", auth.ScopeTransfersCreate, auth.ScopeOperations), ".")
			parts := strings.Split(good, ".")
			return parts[0] + "." + other[1] + "." + parts[2]
		}, 401, invalid},
		{"wrong iss, same key", func(t *testing.T, c *cached, _ string) string {
			return "Bearer " + c.iss.SignClaims(t, claimsWith("iss", "https://evil.example"))
		}, 401, invalid},
		{"wrong aud, same key", func(t *testing.T, c *cached, _ string) string {
			return "Bearer " + c.iss.SignClaims(t, claimsWith("aud", []string{"another-api"}))
		}, 401, invalid},
		{"expired: the cached token, its exp passed", func(_ *testing.T, c *cached, good string) string {
			c.advance(pastExp)
			return good
		}, 401, invalid},
		{"not yet valid: the cached token, the clock set back before its nbf", func(_ *testing.T, c *cached, good string) string {
			c.advance(-auth.Leeway - 2*time.Second)
			return good
		}, 401, invalid},
		{"missing scope: the cached token on a route it has no scope for", func(_ *testing.T, _ *cached, good string) string {
			return good // sent to GET below
		}, 403, `Bearer realm="paysuite", error="insufficient_scope", scope="transferencias:ler"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCached(t, nil)
			good := c.iss.Bearer(t, "client-a", auth.ScopeTransfersCreate)
			c.warm(t, good)
			reached := c.reached.Load()
			bad := tc.refused(t, c, good)
			method, path := http.MethodPost, "/transferencias"
			if tc.status == 403 {
				method, path = http.MethodGet, "/transferencias/1"
			}
			for range 2 { // refused, and refused again: nothing was cached for it
				code, challenge := c.do(t, method, path, bad)
				if diff := cmp.Diff([]any{tc.status, tc.challenge}, []any{code, challenge}); diff != "" {
					t.Errorf("{status challenge} mismatch (-want +got):\n%s", diff)
				}
			}
			if n := c.reached.Load() - reached; n != 0 {
				t.Errorf("%d refused requests reached the handler", n)
			}
		})
	}
}

// TestCachedTokenAfterRotation: a token cached under a key is refused once
// the JWKS no longer has that key (the cache is dropped when the key set
// changes), while a token of the same claims signed by the new key is
// accepted.
func TestCachedTokenAfterRotation(t *testing.T) {
	t.Parallel()
	c := newCached(t, nil)
	old := c.iss.Bearer(t, "client-a", auth.ScopeTransfersCreate)
	c.warm(t, old)
	c.iss.Rotate(t, false) // the provider replaces its key
	c.advance(auth.RefreshInterval)
	// The new key's token makes the verifier refetch the JWKS.
	c.warm(t, c.iss.Bearer(t, "client-a", auth.ScopeTransfersCreate))
	if got := c.metric(t, "auth_token_cache_flushes_total"); got != 1 {
		t.Errorf("cache flushes after a rotation: %v, want 1", got)
	}
	for range 2 {
		if code, challenge := c.do(t, http.MethodPost, "/transferencias", old); code != 401 || challenge != authtest.ChallengeInvalid {
			t.Errorf("the retired key's cached token: %d %q, want 401 invalid_token", code, challenge)
		}
	}
}

// TestCacheSurvivesAnIdenticalRefetch: a refetch of the JWKS that brings
// the same keys (the hourly refresh, or one caused by an unknown kid)
// keeps the cache.
func TestCacheSurvivesAnIdenticalRefetch(t *testing.T) {
	t.Parallel()
	c := newCached(t, nil)
	good := c.iss.Bearer(t, "client-a", auth.ScopeTransfersCreate)
	c.warm(t, good)
	c.advance(auth.RefreshInterval)
	stranger, _ := authtest.NewKey(t)
	fetches := c.iss.Fetches()
	if code, _ := c.do(t, http.MethodPost, "/transferencias", "Bearer "+authtest.SignWith(t, stranger, claimsWith("sub", "x"))); code != 401 {
		t.Fatalf("a token of a key the JWKS lacks: %d, want 401", code)
	}
	if c.iss.Fetches() != fetches+1 {
		t.Fatalf("the unknown kid did not refetch the JWKS")
	}
	hits := c.metric(t, "auth_token_cache_hits_total")
	if code, _ := c.do(t, http.MethodPost, "/transferencias", good); code != 202 {
		t.Fatalf("the cached token after the refetch: %d", code)
	}
	if got := c.metric(t, "auth_token_cache_hits_total"); got != hits+1 {
		t.Errorf("the cached token after a refetch of the same keys was not a hit")
	}
	if got := c.metric(t, "auth_token_cache_flushes_total"); got != 0 {
		t.Errorf("flushes after a refetch of the same keys: %v, want 0", got)
	}
}

// TestCacheKeepsOnlyGoodTokens: a refused token is verified in full each
// time and never enters the cache; the cache holds at most its size, and
// its entries and hit ratio are metrics.
func TestCacheKeepsOnlyGoodTokens(t *testing.T) {
	t.Parallel()
	c := newCached(t, func(cfg *auth.Config) { cfg.TokenCacheSize = 3 })
	bad := flipSignatureByte(c.iss.Bearer(t, "client-a", auth.ScopeTransfersCreate))
	for range 3 {
		if code, _ := c.do(t, http.MethodPost, "/transferencias", bad); code != 401 {
			t.Fatalf("bad signature: %d, want 401", code)
		}
	}
	for _, m := range []struct {
		name string
		want float64
	}{{"auth_token_cache_entries", 0}, {"auth_token_cache_hits_total", 0}, {"auth_token_cache_misses_total", 3}} {
		if got := c.metric(t, m.name); got != m.want {
			t.Errorf("after 3 refused tokens, %s = %v, want %v", m.name, got, m.want)
		}
	}
	for i := range 5 {
		c.warm(t, c.iss.Bearer(t, "client-"+string(rune('a'+i)), auth.ScopeTransfersCreate))
	}
	if got := c.metric(t, "auth_token_cache_entries"); got != 3 {
		t.Errorf("entries after 5 tokens in a cache of 3: %v, want 3", got)
	}
	if hits, misses := c.metric(t, "auth_token_cache_hits_total"), c.metric(t, "auth_token_cache_misses_total"); hits != 5 || misses != 8 {
		t.Errorf("hits %v misses %v, want 5 and 8", hits, misses)
	}
}

// TestCacheOff: AUTH_TOKEN_CACHE_SIZE 0 verifies every request in full and
// registers no cache metrics.
func TestCacheOff(t *testing.T) {
	t.Parallel()
	c := newCached(t, func(cfg *auth.Config) { cfg.TokenCacheSize = 0 })
	good := c.iss.Bearer(t, "client-a", auth.ScopeTransfersCreate)
	for range 2 {
		if code, _ := c.do(t, http.MethodPost, "/transferencias", good); code != 202 {
			t.Fatalf("good token with the cache off: %d", code)
		}
	}
	c.advance(pastExp)
	if code, _ := c.do(t, http.MethodPost, "/transferencias", good); code != 401 {
		t.Errorf("expired token with the cache off: %d, want 401", code)
	}
	mfs, err := c.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "auth_token_cache_") {
			t.Errorf("cache metric %s registered with the cache off", mf.GetName())
		}
	}
}

// TestCacheConcurrent: requests with cached, new and bad tokens race
// with key rotations (run with -race); a bad token is never accepted.
func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	c := newCached(t, func(cfg *auth.Config) { cfg.TokenCacheSize = 8 })
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for i := range 40 {
				tok := c.iss.Bearer(t, "client-"+string(rune('a'+(g+i)%10)), auth.ScopeTransfersCreate)
				if code, _ := c.do(t, http.MethodPost, "/transferencias", flipSignatureByte(tok)); code == 202 {
					accepted.Add(1)
				}
				for range 2 {
					_, _ = c.do(t, http.MethodPost, "/transferencias", tok)
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			c.iss.Rotate(t, true)
			c.advance(auth.RefreshInterval)
		}
	})
	wg.Wait()
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d tokens with a bad signature accepted", n)
	}
	if n := c.metric(t, "auth_token_cache_entries"); n > 8 {
		t.Errorf("%v entries in a cache of 8", n)
	}
}

// flipSignatureByte changes one byte in the middle of the signature of
// bearer (the last characters of base64 may carry padding bits only).
func flipSignatureByte(bearer string) string {
	parts := strings.Split(bearer, ".")
	sig := []byte(parts[2])
	i := len(sig) / 2
	if sig[i] == 'A' {
		sig[i] = 'B'
	} else {
		sig[i] = 'A'
	}
	return parts[0] + "." + parts[1] + "." + string(sig)
}

// claimsWith is a valid token's claims for client-a with k set to v.
func claimsWith(k string, v any) map[string]any {
	now := time.Now()
	m := map[string]any{"iss": authtest.Issuer, "aud": []string{auth.DefaultAudience}, "sub": "client-a",
		"scope": auth.ScopeTransfersCreate, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	m[k] = v
	return m
}
