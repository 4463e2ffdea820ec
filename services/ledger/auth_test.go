package ledger_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
)

// TestBadTokensMintNothing: on the running ledger (PostgreSQL, Kafka), no
// bad token, and no token without contas:admin, opens an account or
// deposits into one: each is a 401 (or 403) problem, with a good or a
// malformed body, and the tables are as before.
func TestBadTokensMintNothing(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.openAccount(t, "AUTH-1", 1_000)
	count := func() string {
		t.Helper()
		var accounts, deposits int
		var cents int64
		if err := s.db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM account), (SELECT count(*) FROM deposit),
			(SELECT coalesce(sum(amount_cents), 0) FROM deposit)`).Scan(&accounts, &deposits, &cents); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d accounts, %d deposits, %d cents deposited", accounts, deposits, cents)
	}
	before := count()
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
	reader := "Bearer " + s.iss.Token(t, "client-a", auth.ScopeAccountsRead, auth.ScopeTransfersCreate)
	for _, r := range requests[:4] {
		st, body := s.call(t, r.method, r.path, r.body, "Authorization", reader, "Idempotency-Key", uuid.NewString())
		if st != 403 || body["type"] != httpapi.KindForbidden.TypeURI() {
			t.Errorf("%s %s without contas:admin: %d %v, want a 403 problem", r.method, r.path, st, body)
		}
	}
	if st, _ := s.call(t, http.MethodGet, "/contas/AUTH-1", "", "Authorization", reader); st != http.StatusOK {
		t.Errorf("GET /contas/AUTH-1 with contas:ler: %d, want 200", st)
	}
	if after := count(); after != before {
		t.Errorf("refused requests changed the ledger: %s, then %s", before, after)
	}
}
