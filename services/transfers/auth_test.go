package transfers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

const goodBody = `{"contaOrigem":"CC-1","contaDestino":"CC-2","valorEmCentavos":100,"moeda":"BRL"}`

// stored counts the transfers and outbox events of the service's database.
func (s *service) stored(t *testing.T) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var transfers, events int
	if err := conn.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM transferencia), (SELECT count(*) FROM outbox_event)`).Scan(&transfers, &events); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d transfers, %d outbox events", transfers, events)
}

// TestBadTokensChangeNothing: on the running service (PostgreSQL, Kafka),
// every input of authtest.BadAuthorizations is a 401 problem with the contract's
// challenge, with a good body or a malformed one, and stores nothing; a
// token without the scope is 403 and stores nothing; only a good token
// gets to the body's 400.
func TestBadTokensChangeNothing(t *testing.T) {
	t.Parallel()
	s := start(t)
	problem := func(t *testing.T, b []byte) httpapi.Problem {
		t.Helper()
		var p httpapi.Problem
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("not a problem: %s", b)
		}
		return p
	}
	for _, tc := range s.iss.BadAuthorizations(t) {
		for _, body := range []string{goodBody, `{"contaOrigem":`} {
			t.Run(tc.Name+" "+body[:14], func(t *testing.T) {
				code, h, b := s.do(t, http.MethodPost, "/transferencias", map[string]string{"Authorization": tc.Authorization,
					"Content-Type": "application/json", "Idempotency-Key": uuid.NewString()}, body)
				if p := problem(t, b); code != 401 || h.Get("WWW-Authenticate") != tc.Challenge || p.Type != httpapi.TypeURI(errkind.Unauthorized) ||
					h.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%d %q %q %+v, want 401 %q unauthorized problem", code, h.Get("WWW-Authenticate"), h.Get("Content-Type"), p, tc.Challenge)
				}
			})
		}
		t.Run(tc.Name+" GET", func(t *testing.T) {
			code, _, _ := s.do(t, http.MethodGet, "/transferencias/"+uuid.NewString(), map[string]string{"Authorization": tc.Authorization}, "")
			if code != 401 {
				t.Errorf("GET: %d, want 401", code)
			}
		})
	}
	t.Run("valid token without the scope", func(t *testing.T) {
		for _, body := range []string{goodBody, `{"contaOrigem":`} {
			code, h, b := s.do(t, http.MethodPost, "/transferencias", map[string]string{
				"Authorization": s.iss.Bearer(t, "client-a", auth.ScopeTransfersRead), "Content-Type": "application/json",
				"Idempotency-Key": uuid.NewString()}, body)
			want := `Bearer realm="paysuite", error="insufficient_scope", scope="transferencias:criar"`
			if p := problem(t, b); code != 403 || h.Get("WWW-Authenticate") != want || p.Type != httpapi.TypeURI(errkind.Forbidden) {
				t.Errorf("%d %q %+v, want 403 %q", code, h.Get("WWW-Authenticate"), p, want)
			}
		}
	})
	if got := s.stored(t); got != "0 transfers, 0 outbox events" {
		t.Errorf("after refused requests: %s, want nothing stored", got)
	}
	t.Run("valid token, malformed body", func(t *testing.T) {
		code, _, b := s.do(t, http.MethodPost, "/transferencias", map[string]string{"Content-Type": "application/json",
			"Idempotency-Key": uuid.NewString()}, `{"contaOrigem":`)
		if p := problem(t, b); code != 400 || p.Type != httpapi.TypeURI(errkind.Malformed) {
			t.Errorf("%d %+v, want 400 malformed-request", code, p)
		}
	})
	if got := s.stored(t); got != "0 transfers, 0 outbox events" {
		t.Errorf("after a malformed body: %s, want nothing stored", got)
	}
	s.post(t, uuid.NewString(), goodBody, nil)
	if got := s.stored(t); got != "1 transfers, 1 outbox events" {
		t.Errorf("after one good request: %s", got)
	}
}

// TestKeyRotation: the service fetches its JWKS over HTTP from the
// provider; when the provider rotates its key, the first token signed by
// the new key makes the running service refetch the JWKS, and the
// retired key's tokens stop working.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	s := start(t)
	get := func(bearer string) int {
		code, _, _ := s.do(t, http.MethodGet, "/transferencias/"+uuid.NewString(), map[string]string{"Authorization": bearer}, "")
		return code
	}
	old := s.iss.Bearer(t, "client-a", authtest.AllScopes...)
	if code := get(old); code != http.StatusNotFound {
		t.Fatalf("before the rotation: %d, want 404 (authenticated, no such transfer)", code)
	}
	fetched := s.iss.Fetches()
	s.iss.Rotate(t, false)
	if code := get(s.iss.Bearer(t, "client-a", authtest.AllScopes...)); code != http.StatusNotFound {
		t.Errorf("a token of the new key: %d, want 404 (authenticated)", code)
	}
	if got := s.iss.Fetches() - fetched; got != 1 {
		t.Errorf("the rotation caused %d JWKS fetches, want 1", got)
	}
	if code := get(old); code != http.StatusUnauthorized {
		t.Errorf("a token of the retired key: %d, want 401", code)
	}
}
