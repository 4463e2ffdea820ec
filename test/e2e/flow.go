package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/apiclient"
	"github.com/paysuite/payments/pkg/events"
)

// Outcome is a terminal status and its reason.
type Outcome struct {
	Status string
	Reason string
}

// Outcomes a test can predict.
var (
	Settled               = Outcome{StatusSettled, ""}
	BlockedByAntifraud    = Outcome{StatusRejected, events.ReasonBlockedByAntifraud}
	InsufficientFunds     = Outcome{StatusRejected, events.ReasonInsufficientFunds}
	AccountNotFound       = Outcome{StatusRejected, events.ReasonAccountNotFound}
	CurrencyMismatch      = Outcome{StatusRejected, events.ReasonCurrencyMismatch}
	SettledOrInsufficient = []Outcome{Settled, InsufficientFunds}
)

// Flow records what a test did (accounts opened and funded, transfers
// requested, the outcomes it can predict), to check the suite's final state
// against.
type Flow struct {
	mu        sync.Mutex
	accounts  map[string]string // id -> currency
	deposited map[string]int64
	requests  map[string]TransferRequest
	allowed   map[string][]Outcome
	order     []string
}

// NewFlow returns an empty flow.
func NewFlow() *Flow {
	return &Flow{accounts: map[string]string{}, deposited: map[string]int64{},
		requests: map[string]TransferRequest{}, allowed: map[string][]Outcome{}}
}

// Fund opens an account through the ledger API and deposits cents into it
// (none when cents is 0), and records both.
func (f *Flow) Fund(tb testing.TB, s *Suite, id, currency string, cents int64) {
	tb.Helper()
	s.OpenAccount(tb, id, currency)
	if cents > 0 {
		s.Deposit(tb, id, cents)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accounts[id] = currency
	f.deposited[id] += cents
}

// Add records a transfer the test will request under key, and the outcomes
// it may end in.
func (f *Flow) Add(key string, req TransferRequest, allowed ...Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.requests[key]; !dup {
		f.order = append(f.order, key)
	}
	f.requests[key] = req
	f.allowed[key] = allowed
}

// IDs returns the transfer ids in the order they were added.
func (f *Flow) IDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.order)
}

// Request returns the request recorded under key.
func (f *Flow) Request(key string) TransferRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[key]
}

// SubmitResult is the end of Submit: the 202 answer; how many attempts
// before it failed without an answer (their outcome unknown to the client);
// how many were answered 409 because the same key was in flight; how many
// found the service stopped.
type SubmitResult struct {
	Response  apiclient.Response
	Lost      int
	Conflicts int
	Stopped   int
}

// Submit posts req under key until the transfers service answers 202: while
// the service is stopped or its connection breaks it tries again (the same
// key makes that safe), and on 409 (the first request still in flight) or
// 503 it waits and tries again. Any other answer is an error.
func (s *Suite) Submit(ctx context.Context, key string, req TransferRequest) (SubmitResult, error) {
	var res SubmitResult
	for {
		r, err := s.PostTransfer(ctx, key, req)
		switch {
		case err == nil && r.Status == http.StatusAccepted:
			res.Response = r
			return res, nil
		case err == nil && r.Status == http.StatusConflict:
			res.Conflicts++
		case err == nil && r.Status == http.StatusServiceUnavailable:
		case err == nil:
			return res, fmt.Errorf("POST /transferencias %s: status %d: %s", key, r.Status, r.Body)
		case ctx.Err() != nil:
			return res, fmt.Errorf("POST /transferencias %s: %w (last: %v)", key, ctx.Err(), err)
		case errors.Is(err, ErrStopped):
			res.Stopped++
		default:
			res.Lost++
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("POST /transferencias %s: %w", key, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CheckAccepted checks a 202 answer: body {"id": key, "status": "PENDENTE"}
// and Location /transferencias/{key}.
func CheckAccepted(key string, r apiclient.Response) error {
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return fmt.Errorf("202 body %s: %v", r.Body, err)
	}
	want := map[string]any{"id": key, "status": StatusPending}
	if d := cmp.Diff(want, body); d != "" {
		return fmt.Errorf("202 body of %s mismatch (-want +got):\n%s", key, d)
	}
	if loc := r.Header.Get("Location"); loc != "/transferencias/"+key {
		return fmt.Errorf("202 of %s: Location %q", key, loc)
	}
	return nil
}

// Check waits until every transfer of the flow is terminal and the suite is
// quiet, then checks the whole outcome:
//   - every transfer ended in one of its allowed outcomes (GET
//     /transferencias/{id});
//   - a settled transfer has exactly one debit of its amount on its source
//     and one credit on its destination; a rejected one has no posting; the
//     ledger's own record of each agrees; antifraud decided each once;
//   - every account's balance (GET /contas/{id}) is its deposits plus its
//     settled credits minus its settled debits;
//   - ledger-wide: per currency the balances sum to zero, every balance is
//     the sum of its postings, no customer balance is negative, every
//     transfer entry is one debit and one credit of one amount;
//   - exactly one authentic webhook per transfer, with its status and
//     reason, and its notification log row DELIVERED;
//   - no dead letters, no refused webhook.
//
// It returns the final transfers. stall bounds each wait's time without
// progress (see WhileProgressing).
func (f *Flow) Check(tb testing.TB, s *Suite, stall time.Duration) map[string]Transfer {
	tb.Helper()
	ids := f.IDs()
	finals := s.WaitTerminal(tb, ids, stall)
	s.WaitQuiet(tb, stall)

	f.mu.Lock()
	defer f.mu.Unlock()

	// Outcomes.
	var wrong []string
	counts := map[Outcome]int{}
	for _, id := range ids {
		got := finals[id]
		o := Outcome{got.Status, got.Reason}
		counts[o]++
		if !slices.Contains(f.allowed[id], o) {
			wrong = append(wrong, fmt.Sprintf("%s: got %v, allowed %v (%+v)", id, o, f.allowed[id], f.requests[id]))
		}
		if got.CreatedAt.IsZero() || got.UpdatedAt.Before(got.CreatedAt) {
			wrong = append(wrong, fmt.Sprintf("%s: criadaEm %v, atualizadaEm %v", id, got.CreatedAt, got.UpdatedAt))
		}
		req := f.requests[id]
		if got.ID != id || got.From != req.From || got.To != req.To || got.AmountCents != req.AmountCents || got.Currency != req.Currency {
			wrong = append(wrong, fmt.Sprintf("%s: GET shows %+v for request %+v", id, got, req))
		}
	}
	if len(wrong) > 0 {
		tb.Errorf("%d transfers with a wrong outcome:\n  %s", len(wrong), strings.Join(wrong, "\n  "))
	}
	tb.Logf("outcomes of %d transfers: %v", len(ids), counts)

	f.checkPostings(tb, s, ids, finals)
	f.checkBalances(tb, s, ids, finals)
	CheckLedger(tb, s)
	f.checkNotifications(tb, s, ids, finals)
	if d := s.DLTRecords(tb); len(d) > 0 {
		tb.Errorf("dead-letter topics hold records: %v", d)
	}
	if r := s.Receiver.Rejected(); len(r) > 0 {
		tb.Errorf("the receiver refused %d webhook requests: %v", len(r), r)
	}
	return finals
}

type postingRow struct {
	Account   string
	Direction string
	Amount    int64
}

func (f *Flow) checkPostings(tb testing.TB, s *Suite, ids []string, finals map[string]Transfer) {
	tb.Helper()
	ctx := context.Background()
	uids := toUUIDs(ids)
	rows, err := s.Ledger.DB.Query(ctx, `SELECT entry_id, account_id, direction, amount_cents FROM posting
		WHERE entry_type = 'TRANSFER' AND entry_id = ANY($1) ORDER BY entry_id, direction DESC`, uids)
	if err != nil {
		tb.Fatalf("read postings: %v", err)
	}
	got := map[string][]postingRow{}
	for rows.Next() {
		var id uuid.UUID
		var p postingRow
		if err := rows.Scan(&id, &p.Account, &p.Direction, &p.Amount); err != nil {
			tb.Fatalf("scan posting: %v", err)
		}
		got[id.String()] = append(got[id.String()], p)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("read postings: %v", err)
	}
	want := map[string][]postingRow{}
	for _, id := range ids {
		if finals[id].Status == StatusSettled {
			r := f.requests[id]
			want[id] = []postingRow{{r.From, "D", r.AmountCents}, {r.To, "C", r.AmountCents}}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		tb.Errorf("transfer postings mismatch (-want: one debit and one credit per settled transfer, none per rejected; +got):\n%s", d)
	}

	// The ledger's own decision record agrees with the transfer's status.
	type decided struct{ Result, Reason string }
	rows, err = s.Ledger.DB.Query(ctx, `SELECT transfer_id, result, coalesce(reason, '') FROM processed_transfer WHERE transfer_id = ANY($1)`, uids)
	if err != nil {
		tb.Fatalf("read processed transfers: %v", err)
	}
	gotDecided := map[string]decided{}
	for rows.Next() {
		var id uuid.UUID
		var d decided
		if err := rows.Scan(&id, &d.Result, &d.Reason); err != nil {
			tb.Fatalf("scan processed transfer: %v", err)
		}
		gotDecided[id.String()] = d
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("read processed transfers: %v", err)
	}
	wantDecided := map[string]decided{}
	for _, id := range ids {
		if fin := finals[id]; fin.Reason != events.ReasonBlockedByAntifraud {
			wantDecided[id] = decided{fin.Status, fin.Reason}
		}
	}
	if d := cmp.Diff(wantDecided, gotDecided); d != "" {
		tb.Errorf("ledger processed_transfer mismatch (-want +got):\n%s", d)
	}

	var decisions int
	if err := s.Antifraud.DB.QueryRow(ctx, `SELECT count(*) FROM decision WHERE transfer_id = ANY($1)`, uids).Scan(&decisions); err != nil {
		tb.Fatalf("count decisions: %v", err)
	}
	if decisions != len(ids) {
		tb.Errorf("antifraud decided %d of %d transfers", decisions, len(ids))
	}
}

func (f *Flow) checkBalances(tb testing.TB, s *Suite, ids []string, finals map[string]Transfer) {
	tb.Helper()
	want := map[string]int64{}
	for a := range f.accounts {
		want[a] = f.deposited[a]
	}
	for _, id := range ids {
		if finals[id].Status != StatusSettled {
			continue
		}
		r := f.requests[id]
		want[r.From] -= r.AmountCents
		want[r.To] += r.AmountCents
	}
	got := map[string]int64{}
	for a, cur := range f.accounts {
		acc := s.Account(tb, a)
		if acc.Currency != cur {
			tb.Errorf("account %s: currency %s, want %s", a, acc.Currency, cur)
		}
		got[a] = acc.BalanceCents
	}
	if d := cmp.Diff(want, got); d != "" {
		tb.Errorf("balances mismatch (-want: deposits plus settled credits minus settled debits; +got):\n%s", d)
	}
}

// CheckLedger checks the ledger's invariants over its whole database: per
// currency the balances, funding accounts included, sum to zero; every
// balance is the sum of its postings; no customer balance is negative;
// every entry is exactly one debit and one credit of the same amount.
func CheckLedger(tb testing.TB, s *Suite) {
	tb.Helper()
	ctx := context.Background()
	db := s.Ledger.DB

	sums := map[string]int64{}
	rows, err := db.Query(ctx, `SELECT currency, sum(balance_cents)::bigint FROM account GROUP BY currency`)
	if err != nil {
		tb.Fatalf("sum balances: %v", err)
	}
	for rows.Next() {
		var cur string
		var sum int64
		if err := rows.Scan(&cur, &sum); err != nil {
			tb.Fatalf("scan sum: %v", err)
		}
		sums[cur] = sum
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("sum balances: %v", err)
	}
	for cur, sum := range sums {
		if sum != 0 {
			tb.Errorf("ledger: balances of %s sum to %d, want 0 (all sums: %v)", cur, sum, sums)
		}
	}

	var bad []string
	rows, err = db.Query(ctx, `
		SELECT a.id, a.funding, a.balance_cents,
		       coalesce(sum(CASE p.direction WHEN 'C' THEN p.amount_cents ELSE -p.amount_cents END), 0)::bigint
		FROM account a LEFT JOIN posting p ON p.account_id = a.id
		GROUP BY a.id, a.funding, a.balance_cents`)
	if err != nil {
		tb.Fatalf("balances against postings: %v", err)
	}
	accounts := 0
	for rows.Next() {
		var id string
		var funding bool
		var balance, postings int64
		if err := rows.Scan(&id, &funding, &balance, &postings); err != nil {
			tb.Fatalf("scan balance: %v", err)
		}
		accounts++
		if balance != postings {
			bad = append(bad, fmt.Sprintf("%s: balance %d, postings sum to %d", id, balance, postings))
		}
		if !funding && balance < 0 {
			bad = append(bad, fmt.Sprintf("%s: negative balance %d", id, balance))
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("balances against postings: %v", err)
	}

	rows, err = db.Query(ctx, `
		SELECT entry_type, entry_id, count(*), count(*) FILTER (WHERE direction = 'D'),
		       count(DISTINCT amount_cents)
		FROM posting GROUP BY entry_type, entry_id
		HAVING count(*) <> 2 OR count(*) FILTER (WHERE direction = 'D') <> 1 OR count(DISTINCT amount_cents) <> 1`)
	if err != nil {
		tb.Fatalf("entries: %v", err)
	}
	for rows.Next() {
		var typ string
		var id uuid.UUID
		var n, debits, amounts int
		if err := rows.Scan(&typ, &id, &n, &debits, &amounts); err != nil {
			tb.Fatalf("scan entry: %v", err)
		}
		bad = append(bad, fmt.Sprintf("%s %s: %d postings, %d debits, %d distinct amounts", typ, id, n, debits, amounts))
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("entries: %v", err)
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		tb.Errorf("ledger invariants broken:\n  %s", strings.Join(bad, "\n  "))
	}
	if accounts == 0 {
		tb.Errorf("ledger has no accounts: the check checked nothing")
	}
}

type notified struct {
	Status string
	Reason string
	Count  int
}

func (f *Flow) checkNotifications(tb testing.TB, s *Suite, ids []string, finals map[string]Transfer) {
	tb.Helper()
	byTransfer := s.Receiver.ByTransfer()
	want := map[string]notified{}
	got := map[string]notified{}
	for _, id := range ids {
		fin := finals[id]
		want[id] = notified{fin.Status, fin.Reason, 1}
		ds := byTransfer[id]
		n := notified{Count: len(ds)}
		if len(ds) > 0 {
			n.Status, n.Reason = ds[0].Payload.Status, ds[0].Payload.Reason
		}
		for _, d := range ds[1:] {
			if d.Payload != ds[0].Payload {
				n.Status += fmt.Sprintf(" / then %+v", d.Payload)
			}
		}
		for _, d := range ds {
			wantType := map[string]string{StatusSettled: events.TypeSettled, StatusRejected: events.TypeRejected}[d.Payload.Status]
			if d.Payload.Type != wantType || d.Payload.OccurredAt.IsZero() {
				n.Status += fmt.Sprintf(" / tipo %q ocorridoEm %v", d.Payload.Type, d.Payload.OccurredAt)
			}
		}
		got[id] = n
	}
	if d := cmp.Diff(want, got); d != "" {
		tb.Errorf("webhooks per transfer mismatch (-want: exactly one, with the final status; +got):\n%s", d)
	}

	// The notification log: one row per transfer, DELIVERED.
	rows, err := s.Notifications.DB.Query(context.Background(),
		`SELECT transfer_id, status, count(*) OVER (PARTITION BY transfer_id) FROM notification WHERE transfer_id = ANY($1)`, toUUIDs(ids))
	if err != nil {
		tb.Fatalf("read notification log: %v", err)
	}
	type logRow struct {
		Status string
		Rows   int
	}
	gotLog := map[string]logRow{}
	for rows.Next() {
		var id uuid.UUID
		var r logRow
		if err := rows.Scan(&id, &r.Status, &r.Rows); err != nil {
			tb.Fatalf("scan notification: %v", err)
		}
		gotLog[id.String()] = r
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("read notification log: %v", err)
	}
	wantLog := map[string]logRow{}
	for _, id := range ids {
		wantLog[id] = logRow{"DELIVERED", 1}
	}
	if d := cmp.Diff(wantLog, gotLog); d != "" {
		tb.Errorf("notification log mismatch (-want +got):\n%s", d)
	}
}

// CheckNoStrayWebhooks fails the test if a webhook arrived for a transfer
// none of the flows requested.
func CheckNoStrayWebhooks(tb testing.TB, s *Suite, flows ...*Flow) {
	tb.Helper()
	known := map[string]bool{}
	for _, f := range flows {
		for _, id := range f.IDs() {
			known[id] = true
		}
	}
	for id, ds := range s.Receiver.ByTransfer() {
		if !known[id] {
			tb.Errorf("%d webhooks for transfer %s, which no test requested", len(ds), id)
		}
	}
}

func toUUIDs(ids []string) []uuid.UUID {
	out := make([]uuid.UUID, len(ids))
	for i, id := range ids {
		out[i] = uuid.MustParse(id)
	}
	return out
}
