package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/test/e2e"
)

// TestAuthentication: with authentication on in all four services, a
// request without a token is 401 on every one of them (before routing, so
// even unknown paths), health and metrics stay open, and a client whose
// token lacks the scope gets 403 and changes nothing; deposits need
// contas:depositar, and accounts answer only their titular.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := e2e.NewSuite(t, e2e.Options{Partitions: 1})
	anonymous := s.As(e2e.Client{Name: "anonymous"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, svc := range s.Services() {
		for _, path := range []string{"/transferencias/" + uuid.NewString(), "/contas/X", "/anything"} {
			r, err := anonymous.Do(ctx, svc, http.MethodGet, path, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") != `Bearer realm="paysuite"` {
				t.Errorf("%s GET %s without a token: %d %q, want 401 with a challenge", svc.Name, path, r.Status, r.Header.Get("WWW-Authenticate"))
			}
		}
		for _, path := range []string{"/healthz", "/metrics"} {
			r, err := anonymous.Do(ctx, svc, http.MethodGet, path, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != http.StatusOK {
				t.Errorf("%s GET %s without a token: %d, want 200", svc.Name, path, r.Status)
			}
		}
	}

	reader := s.As(e2e.Client{Name: "leitor", Bearer: s.Issuer.Bearer(t, "leitor", auth.ScopeTransfersRead, auth.ScopeAccountsRead)})
	key := uuid.NewString()
	r, err := reader.PostTransfer(ctx, key, e2e.TransferRequest{From: "X-1", To: "X-2", AmountCents: 1, Currency: "BRL"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusForbidden || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="insufficient_scope", scope="transferencias:criar"`) {
		t.Errorf("POST /transferencias with read scopes: %d %q, want 403 insufficient_scope", r.Status, r.Header.Get("WWW-Authenticate"))
	}
	r, err = reader.Do(ctx, s.Ledger, http.MethodPost, "/contas", "", map[string]string{"id": "X-1", "moeda": "BRL"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusForbidden {
		t.Errorf("POST /contas with read scopes: %d, want 403", r.Status)
	}
	// Minting is its own power: the transfer client (every other scope,
	// contas:admin and operacoes included) does not deposit; the minter
	// does, and a client without operacoes reads only its own accounts.
	s.OpenAccount(t, "X-3", "BRL")
	r, err = s.Do(ctx, s.Ledger, http.MethodPost, "/contas/X-3/depositos", uuid.NewString(), map[string]int64{"valorEmCentavos": 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusForbidden || !strings.Contains(r.Header.Get("WWW-Authenticate"), `scope="contas:depositar"`) {
		t.Errorf("a deposit by the transfer client: %d %q, want 403 insufficient_scope contas:depositar", r.Status, r.Header.Get("WWW-Authenticate"))
	}
	s.Deposit(t, "X-3", 1)
	for _, path := range []string{"/contas/X-3", "/contas/X-3/lancamentos"} {
		if r, err = reader.Do(ctx, s.Ledger, http.MethodGet, path, "", nil); err != nil || r.Status != http.StatusNotFound {
			t.Errorf("GET %s by another client: %d %v, want 404", path, r.Status, err)
		}
	}
	var n int
	if err := s.Transfers.DB.QueryRow(ctx, `SELECT count(*) FROM transferencia`).Scan(&n); err != nil || n != 0 {
		t.Errorf("transfers stored after refused requests: %d (%v), want 0", n, err)
	}
	if err := s.Ledger.DB.QueryRow(ctx, `SELECT count(*) FROM account WHERE id = 'X-1'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("accounts opened after refused requests: %d (%v), want 0", n, err)
	}
}
