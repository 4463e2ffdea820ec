package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
)

// TestJWKSRefreshedOnUnknownKid: the JWKS is fetched once at start and
// cached; a token naming a kid the cache lacks refetches it, but a flood of
// unknown kids costs at most one fetch per auth.RefreshInterval.
func TestJWKSRefreshedOnUnknownKid(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := newVerifier(t, ctx, iss.Config())
	now := time.Now()
	auth.SetClock(v, func() time.Time { return now })
	verify := func(tok string) error {
		_, err := v.Verify(ctx, tok)
		return err
	}
	fetches := func(want int64) {
		t.Helper()
		if got := iss.Fetches(); got != want {
			t.Errorf("JWKS fetched %d times, want %d", got, want)
		}
	}

	first := iss.Token(t, "client-a", "contas:ler")
	for range 5 {
		if err := verify(first); err != nil {
			t.Fatalf("first key: %v", err)
		}
	}
	fetches(1) // at start, then from the cache

	iss.Rotate(t, false) // the provider replaces its key
	second := iss.Token(t, "client-a", "contas:ler")
	if err := verify(second); err != nil {
		t.Fatalf("after a rotation, the new key's token: %v", err)
	}
	fetches(2)
	if err := verify(first); !errors.Is(err, auth.ErrUnknownKey) {
		t.Errorf("the retired key's token: %v, want auth.ErrUnknownKey", err)
	}

	iss.Rotate(t, true) // another rotation within auth.RefreshInterval
	third := iss.Token(t, "client-a", "contas:ler")
	for range 10 {
		if err := verify(third); !errors.Is(err, auth.ErrUnknownKey) {
			t.Fatalf("a new kid within %v of the last refresh: %v, want auth.ErrUnknownKey", auth.RefreshInterval, err)
		}
	}
	fetches(2)

	now = now.Add(auth.RefreshInterval)
	if err := verify(third); err != nil {
		t.Errorf("a new kid %v after the last refresh: %v", auth.RefreshInterval, err)
	}
	if err := verify(second); err != nil {
		t.Errorf("the overlapping old key after the refresh: %v", err)
	}
	fetches(3)
}

// TestJWKSUnavailable: a JWKS URL that does not answer does not stop the
// service from starting; tokens then get auth.ErrKeysUnavailable (a 503), not
// a 401 that would blame the client.
func TestJWKSUnavailable(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	cfg := iss.Config()
	cfg.JWKSURL = "http://127.0.0.1:1/jwks.json"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := newVerifier(t, ctx, cfg)
	if _, err := v.Verify(ctx, iss.Token(t, "client-a")); !errors.Is(err, auth.ErrKeysUnavailable) {
		t.Errorf("Verify with no JWKS: %v, want auth.ErrKeysUnavailable", err)
	}
}

// TestVerifyAfterContextEnds: a service's context is cancelled before its
// HTTP server has drained; the requests still in flight verify their
// tokens against the cached JWKS until Close (they once got a 500 from a
// panic inside the stopped cache).
func TestVerifyAfterContextEnds(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	v, err := auth.NewVerifier(ctx, iss.Config(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tok := iss.Token(t, "client-a", "contas:ler")
	cancel()
	for range 3 {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := v.Verify(rctx, tok)
		rcancel()
		if err != nil {
			t.Fatalf("Verify after the service's context ended: %v", err)
		}
	}
	if err := v.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
