package ledger_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
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
	// About a hundred refusals from one address in a second: the default
	// refusal burst (100, pkg/auth's middleware tests cover it) would
	// answer the last of them, and the checks after them, 429.
	s := startWith(t, map[string]string{"AUTH_REFUSED_RATE_BURST": "1000"})
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
				if st != 401 || body["type"] != httpapi.TypeURI(errkind.Unauthorized) {
					t.Errorf("%d %v, want a 401 unauthorized problem", st, body)
				}
			})
		}
	}
	reader := "Bearer " + s.iss.Token(t, ledgertest.Client, auth.ScopeAccountsRead, auth.ScopeTransfersCreate)
	for _, r := range requests[:4] {
		st, body := s.call(t, r.method, r.path, r.body, "Authorization", reader, "Idempotency-Key", uuid.NewString())
		if st != 403 || body["type"] != httpapi.TypeURI(errkind.Forbidden) {
			t.Errorf("%s %s without contas:admin or contas:depositar: %d %v, want a 403 problem", r.method, r.path, st, body)
		}
	}
	admin := "Bearer " + s.iss.Token(t, ledgertest.Client, auth.ScopeAccountsAdmin, auth.ScopeAccountsRead, auth.ScopeOperations)
	for _, r := range requests[2:4] {
		st, body := s.call(t, r.method, r.path, r.body, "Authorization", admin, "Idempotency-Key", uuid.NewString())
		if st != 403 || body["type"] != httpapi.TypeURI(errkind.Forbidden) || !strings.Contains(body["detail"].(string), auth.ScopeAccountsDeposit) {
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
	if _, shown := body["saldoEmCentavos"]; st != http.StatusCreated || body["valorEmCentavos"] != 5000.0 || shown {
		t.Fatalf("deposit at the ceiling with contas:depositar: %d %v, want 201 without the balance of an account tesouraria does not hold", st, body)
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
	want := map[string]any{"type": httpapi.TypeURI(ledger.KindDepositCeiling), "status": 422.0,
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

// TestDailyDepositCeiling: on the running ledger, one client's deposits
// of one currency in one UTC day stop at LEDGER_MAX_DEPOSIT_CENTS_PER_DAY,
// even when they arrive at once on several accounts: each deposit that
// would pass it is a 422 deposit-over-daily-ceiling that writes nothing.
// Another client, or another currency, has a count of its own, and a
// replay of an accepted deposit is not counted again.
func TestDailyDepositCeiling(t *testing.T) {
	t.Parallel()
	s := startWith(t, map[string]string{"LEDGER_MAX_DEPOSIT_CENTS": "5000", "LEDGER_MAX_DEPOSIT_CENTS_PER_DAY": "10000"})
	s.openAccount(t, "DAY-1", 0)
	s.openAccount(t, "DAY-2", 0)
	if _, _, err := s.store.CreateAccount(context.Background(), "DAY-USD", "USD", ledgertest.Client); err != nil {
		t.Fatal(err)
	}
	minter := "Bearer " + s.iss.Token(t, "tesouraria", auth.ScopeAccountsDeposit)
	deposit := func(bearer, account, key string, cents int) (int, map[string]any) {
		return s.call(t, http.MethodPost, "/contas/"+account+"/depositos", fmt.Sprintf(`{"valorEmCentavos":%d}`, cents),
			"Authorization", bearer, "Idempotency-Key", key)
	}

	// Ten deposits of 3000 at once, on two accounts: three fit in 10000.
	keys := make([]string, 10)
	statuses := make([]int, 10)
	types := make([]any, 10)
	var wg sync.WaitGroup
	for i := range keys {
		keys[i] = uuid.NewString()
		wg.Go(func() {
			var body map[string]any
			statuses[i], body = deposit(minter, []string{"DAY-1", "DAY-2"}[i%2], keys[i], 3000)
			types[i] = body["type"]
		})
	}
	wg.Wait()
	accepted, accKey, accAccount := 0, "", ""
	for i, st := range statuses {
		switch {
		case st == http.StatusCreated:
			accepted, accKey, accAccount = accepted+1, keys[i], []string{"DAY-1", "DAY-2"}[i%2]
		case st != 422 || types[i] != httpapi.TypeURI(ledger.KindDepositDailyCeiling):
			t.Errorf("deposit %d: %d %v, want 201 or a 422 %s", i, st, types[i], ledger.KindDepositDailyCeiling)
		}
	}
	if accepted != 3 {
		t.Fatalf("%d concurrent deposits of 3000 accepted under a daily ceiling of 10000, want 3", accepted)
	}
	if got := s.balance(t, "DAY-1") + s.balance(t, "DAY-2"); got != 9000 {
		t.Errorf("deposited %d cents, want 9000: refused deposits must write nothing", got)
	}

	before := s.count(t)
	for _, tc := range []struct {
		name, bearer, account, key string
		cents, want                int
	}{
		{"a replay of an accepted deposit", minter, accAccount, accKey, 3000, http.StatusCreated},
		{"up to the ceiling", minter, "DAY-1", uuid.NewString(), 1000, http.StatusCreated},
		{"one cent past it", minter, "DAY-2", uuid.NewString(), 1, 422},
		{"another currency", minter, "DAY-USD", uuid.NewString(), 5000, http.StatusCreated},
		{"another client", "Bearer " + s.iss.Token(t, "tesouraria-2", auth.ScopeAccountsDeposit), "DAY-2", uuid.NewString(), 5000, http.StatusCreated},
	} {
		st, body := deposit(tc.bearer, tc.account, tc.key, tc.cents)
		if st != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.name, st, body, tc.want)
		}
		if st == 422 && (body["type"] != httpapi.TypeURI(ledger.KindDepositDailyCeiling) || !strings.Contains(body["detail"].(string), "10000")) {
			t.Errorf("%s: %v, want a %s problem naming the ceiling", tc.name, body, ledger.KindDepositDailyCeiling)
		}
	}
	if got := s.balance(t, "DAY-1") + s.balance(t, "DAY-2"); got != 15000 {
		t.Errorf("BRL deposited %d cents, want 15000 (10000 by tesouraria, 5000 by tesouraria-2)", got)
	}
	if after := s.count(t); after == before {
		t.Errorf("the accepted deposits changed nothing: %s", after)
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
	for value, wantErr := range map[string]bool{"": false, "1": false, "1000000000000000000": false, "0": true, "1000000000000000001": true, "-5": true} {
		env := maps.Clone(base)
		env["LEDGER_MAX_DEPOSIT_CENTS_PER_DAY"] = value
		cfg, err := ledgerConfig(env)
		if (err != nil) != wantErr {
			t.Errorf("LEDGER_MAX_DEPOSIT_CENTS_PER_DAY=%q: err %v, want error %v", value, err, wantErr)
		}
		if value == "" && cfg.MaxDepositCentsPerDay != 100_000_000_000 {
			t.Errorf("default daily ceiling %d, want 10^11", cfg.MaxDepositCentsPerDay)
		}
	}
}
