package ledger_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/test/ledgertest"
)

// count describes what the ledger holds: accounts, deposits and cents
// deposited.
func (s *service) count(t *testing.T) string {
	t.Helper()
	var accounts, deposits int
	var cents int64
	if err := s.db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM account), (SELECT count(*) FROM deposit),
			(SELECT coalesce(sum(amount_cents), 0) FROM deposit)`).Scan(&accounts, &deposits, &cents); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d accounts, %d deposits, %d cents deposited", accounts, deposits, cents)
}

// TestBadTokensMintNothing: on the running ledger (PostgreSQL, Kafka), no
// bad token, and no token without the scope of the write, opens an account
// or deposits into one: each is a 401 (or 403) problem, with a good or a
// malformed body, and the tables are as before. contas:admin, which opens
// accounts, does not mint.
func TestBadTokensMintNothing(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.openAccount(t, "AUTH-1", 1_000)
	before := s.count(t)
	type request struct{ method, path, body string }
	requests := []request{
		{http.MethodPost, "/contas", `{"id":"AUTH-2","moeda":"BRL"}`},
		{http.MethodPost, "/contas", `{"id":`},
		{http.MethodPost, "/contas/AUTH-1/depositos", `{"valorEmCentavos":1000000000000000}`},
		{http.MethodPost, "/contas/AUTH-1/depositos", `{"valorEmCentavos":`},
		{http.MethodGet, "/contas/AUTH-1", ""},
	}
	for _, tc := range s.iss.BadAuthorizations(t) {
		for _, r := range requests {
			t.Run(tc.Name+" "+r.method+" "+r.path+" "+r.body, func(t *testing.T) {
				st, body := s.call(t, r.method, r.path, r.body, "Authorization", tc.Authorization, "Idempotency-Key", uuid.NewString())
				if st != 401 || body["type"] != httpapi.KindUnauthorized.TypeURI() {
					t.Errorf("%d %v, want a 401 unauthorized problem", st, body)
				}
			})
		}
	}
	reader := "Bearer " + s.iss.Token(t, ledgertest.Client, auth.ScopeAccountsRead, auth.ScopeTransfersCreate)
	for _, r := range requests[:4] {
		st, body := s.call(t, r.method, r.path, r.body, "Authorization", reader, "Idempotency-Key", uuid.NewString())
		if st != 403 || body["type"] != httpapi.KindForbidden.TypeURI() {
			t.Errorf("%s %s without contas:admin or contas:depositar: %d %v, want a 403 problem", r.method, r.path, st, body)
		}
	}
	admin := "Bearer " + s.iss.Token(t, ledgertest.Client, auth.ScopeAccountsAdmin, auth.ScopeAccountsRead, auth.ScopeOperations)
	for _, r := range requests[2:4] {
		st, body := s.call(t, r.method, r.path, r.body, "Authorization", admin, "Idempotency-Key", uuid.NewString())
		if st != 403 || body["type"] != httpapi.KindForbidden.TypeURI() || !strings.Contains(body["detail"].(string), auth.ScopeAccountsDeposit) {
			t.Errorf("deposit with contas:admin and operacoes but not contas:depositar: %d %v, want a 403 naming contas:depositar", st, body)
		}
	}
	if st, _ := s.call(t, http.MethodGet, "/contas/AUTH-1", "", "Authorization", reader); st != http.StatusOK {
		t.Errorf("GET /contas/AUTH-1 by its titular with contas:ler: %d, want 200", st)
	}
	if after := s.count(t); after != before {
		t.Errorf("refused requests changed the ledger: %s, then %s", before, after)
	}
}

// TestDepositsNeedTheirOwnScopeAndAreRecorded: a token with only
// contas:depositar deposits (201), the deposit row names its client and
// request id; a deposit above LEDGER_MAX_DEPOSIT_CENTS is a 422 of its own
// problem type that writes nothing.
func TestDepositsNeedTheirOwnScopeAndAreRecorded(t *testing.T) {
	t.Parallel()
	s := startWith(t, map[string]string{"LEDGER_MAX_DEPOSIT_CENTS": "5000"})
	s.openAccount(t, "MINT-1", 0)
	minter := "Bearer " + s.iss.Token(t, "tesouraria", auth.ScopeAccountsDeposit)
	key := uuid.NewString()
	st, body := s.call(t, http.MethodPost, "/contas/MINT-1/depositos", `{"valorEmCentavos":5000}`,
		"Authorization", minter, "Idempotency-Key", key, "X-Request-Id", "mint-req-1")
	if st != http.StatusCreated || body["saldoEmCentavos"] != 5000.0 {
		t.Fatalf("deposit at the ceiling with contas:depositar: %d %v, want 201 and a balance of 5000", st, body)
	}
	var client, request, currency string
	if err := s.db.QueryRow(context.Background(), `SELECT client_id, request_id, currency FROM deposit WHERE id = $1`, key).
		Scan(&client, &request, &currency); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tesouraria", "mint-req-1", "BRL"}, []string{client, request, currency}); diff != "" {
		t.Errorf("deposit row mismatch (-want +got):\n%s", diff)
	}

	before := s.count(t)
	st, body = s.call(t, http.MethodPost, "/contas/MINT-1/depositos", `{"valorEmCentavos":5001}`,
		"Authorization", minter, "Idempotency-Key", uuid.NewString())
	want := map[string]any{"type": httpapi.KindDepositCeiling.TypeURI(), "status": 422.0,
		"errors": []any{map[string]any{"field": "valorEmCentavos", "message": "must be at most 5000"}}}
	got := map[string]any{"type": body["type"], "status": body["status"], "errors": body["errors"]}
	if diff := cmp.Diff(want, got); st != 422 || diff != "" {
		t.Errorf("deposit over the ceiling: %d, mismatch (-want +got):\n%s", st, diff)
	}
	if after := s.count(t); after != before {
		t.Errorf("a refused deposit changed the ledger: %s, then %s", before, after)
	}
	if got := s.balance(t, "MINT-1"); got != 5000 {
		t.Errorf("balance = %d, want 5000", got)
	}
}

// TestAccountsArePrivateToTheirTitular: on the running ledger, another
// client's account and its postings answer 404 with the body an unknown
// account gets; the titular and operators read them.
func TestAccountsArePrivateToTheirTitular(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.openAccount(t, "PRIV-1", 700)
	other := "Bearer " + s.iss.Token(t, "client-b", auth.ScopeAccountsRead)
	titular := "Bearer " + s.iss.Token(t, ledgertest.Client, auth.ScopeAccountsRead)
	operator := "Bearer " + s.iss.Token(t, "ops", auth.ScopeOperations)
	for _, sub := range []string{"", "/lancamentos"} {
		for _, bearer := range []string{titular, operator} {
			if st, body := s.call(t, http.MethodGet, "/contas/PRIV-1"+sub, "", "Authorization", bearer); st != http.StatusOK {
				t.Errorf("GET /contas/PRIV-1%s by the titular or an operator: %d %v, want 200", sub, st, body)
			}
		}
		st, hidden := s.call(t, http.MethodGet, "/contas/PRIV-1"+sub, "", "Authorization", other)
		stU, unknown := s.call(t, http.MethodGet, "/contas/PRIV-0"+sub, "", "Authorization", other)
		for _, m := range []map[string]any{hidden, unknown} {
			m["instance"] = strings.Replace(m["instance"].(string), "PRIV-1", "PRIV-0", 1)
			delete(m, "requestId")
		}
		if diff := cmp.Diff(unknown, hidden); st != 404 || stU != 404 || diff != "" {
			t.Errorf("GET /contas/PRIV-1%s by another client: %d, unknown %d, mismatch (-unknown +other):\n%s", sub, st, stU, diff)
		}
	}
}

// The environment's ceiling is checked at start: outside 1..10^15 the
// ledger refuses to start.
func TestMaxDepositSetting(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x", "AUTH_JWKS_FILE": "jwks.json", "AUTH_ISSUER": "paysuite-test",
		"LEDGER_AUTHORIZATION_JWKS_FILE": "transfer-jwks.json"}
	for value, wantErr := range map[string]bool{"": false, "1": false, "1000000000000000": false, "0": true, "1000000000000001": true, "-5": true} {
		env := maps.Clone(base)
		env["LEDGER_MAX_DEPOSIT_CENTS"] = value
		cfg, err := ledgerConfig(env)
		if (err != nil) != wantErr {
			t.Errorf("LEDGER_MAX_DEPOSIT_CENTS=%q: err %v, want error %v", value, err, wantErr)
		}
		if value == "" && cfg.MaxDepositCents != 1_000_000_000 {
			t.Errorf("default ceiling %d, want 10^9", cfg.MaxDepositCents)
		}
	}
}
